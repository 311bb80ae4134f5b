"""The admin console: static pages served at /console, built on the REST API and nothing else."""
