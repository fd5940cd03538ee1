"""What every layer may use: paths, progress reporting, atomic files, the rendering blocks."""
