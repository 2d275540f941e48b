"""History across commits: collect, series, track (change points), dashboard, plots,
comparison figures, builds, the Pages site."""
