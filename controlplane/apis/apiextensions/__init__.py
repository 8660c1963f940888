"""apiextensions.k8s.io: CustomResourceDefinitions' own validation (:mod:`.crd`) and their
structural schemas applied to objects (:mod:`.schema`, :mod:`.cel`). Pure: no I/O."""
