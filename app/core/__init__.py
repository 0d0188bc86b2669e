"""Core: settings, database, models, errors, units, logging. Imports nothing else of the portal."""
