"""Analysis of run folders: evaluation, reports, rendering, latent search."""
