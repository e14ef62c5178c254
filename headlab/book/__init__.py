"""Building the book: presets, papermill runs, the static site, fine-tuning settings chosen on dev."""
