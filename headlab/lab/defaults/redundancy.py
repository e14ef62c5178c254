"""Page 01's random shares of heads: page 10 imports them too, so its random pruning curve is 01's masks (their
results are reused, not run again)."""

SHARES = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  # shares of all heads masked
DRAWS = 10  # random head sets per share (enough for the t interval over draws to decide "falls steadily")

__all__ = ["SHARES", "DRAWS"]
