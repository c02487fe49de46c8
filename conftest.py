# Wires the suite's plugin for runs from a checkout, also when plugin
# autoloading is off; installed, the entry point of the same name loads it.
pytest_plugins = ["conformance.plugin"]
