"""Per-tenant workspaces over HTTP: tokens or JWTs -> tenants -> their own apps
(docs/tenants.md)."""
