"""The seeds' studies: their measures, their verdict rules, and each rule's calibration by simulation of
the design it is used on (layer between the analysis layers (probes, latent search) and sweeps).

A verdict rule (``studies.rules.Rule``) declares the design it applies to (``studies.rules.Design``: the
units of replication and what is shared across them) and carries a simulation of that design under its
null and under a stated effect. ``python -m studies.calibrate`` runs every (rule, design) pair and writes
the records (``studies/records.json``, shipped with the package, and ``bench/results/verdict_calibration.*``);
``studies.rules.verdict`` refuses to give a verdict for a design without a passing record.

Modules: ``rules`` (the framework), ``calibrate`` (``python -m studies.calibrate``), ``fresh_seeds``
("target met", "better" / "worse" / "equivalent", "unchanged" / "changed"), ``connectivity`` (team-cluster
statistics and the "connected", "separated", "precondition" rules), ``connectivity_verdict`` (the probe
report's verdict), ``barrier_calibration`` (the per-job barrier estimators' calibration), ``atlas`` (the
ATLAS study's "grows_with_n" / "grows_with_compute"), ``liveness`` (is a latent space live: "latent_live", the
precondition of every latent-search verdict).
"""
