"""One module per finding of the study: the analysis, and the verdict it supports."""
