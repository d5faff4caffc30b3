# Placeholder: install rules are filled in with the package config.
