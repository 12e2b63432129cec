"""The hazard catalogue as data: one TOML file per family, shipped as package `dynacheck.rules_data`."""
