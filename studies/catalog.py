"""The modules that register verdict rules (``studies.rules.register``): one line per module. ``python -m
studies.calibrate`` imports each before it calibrates every registered (rule, design) pair."""

RULE_MODULES = (
    "studies.atlas",
    "studies.atlas_rerun",
    "studies.fresh_seeds",
    "studies.connectivity",
    "studies.liveness",
)
