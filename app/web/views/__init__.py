"""What the pages and the API show, one module per page: built from the domains'
repositories and services and the read side (`app/reads`); no rule is decided here."""
