"""History across commits: collect, track (change points), dashboard, plots, builds."""
