"""CustomResourceDefinitions served by the API server: their kinds as resource types
(:mod:`.types`), the registry that swaps them in (:mod:`.registry`) and the controller that
watches CRDs and keeps their status (:mod:`.controller`)."""
