"""HTTP routes: one codec per endpoint family over one shared handler, the other endpoints, the
route table (:mod:`mockserver.routes.table`)."""
