"""The ``marl`` command: one module per subcommand; each parses arguments and calls the Python API."""
