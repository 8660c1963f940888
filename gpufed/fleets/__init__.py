"""Fleet files shipped with gpufed (package data): ``demo.yaml`` is what `gpufed up` runs."""
