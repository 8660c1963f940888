"""Karmada's autoscalers on the hub: FederatedHPA and CronFederatedHPA.

* :mod:`.calculating` -- kube's replica calculator (pure);
* :mod:`.behavior` -- kube's stabilization windows, scaling policies and bounds (pure);
* :mod:`.podmetrics` -- the members' pods and resource metrics the controller reads (a protocol, pure);
* :mod:`.resources` -- kube's replica calculator for cpu and memory over those pods (pure);
* :mod:`.metrics` -- a FederatedHPA's metrics answered from the members' GPU utilization and
  resource metrics (pure);
* :mod:`.selecting` -- the scale target's pod selector, checked as kube checks it (pure);
* :mod:`.controller` -- the FederatedHPA controller: every sync period, scale the target;
* :mod:`.cronrules` -- when a CronFederatedHPA's rules fire and how their history is kept (pure);
* :mod:`.cron` -- the CronFederatedHPA controller.
"""
