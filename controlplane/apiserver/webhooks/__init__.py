"""Admission webhooks configured by ValidatingWebhookConfiguration and MutatingWebhookConfiguration
objects, called for users' writes as kube-apiserver calls them.

:mod:`.matching` decides which webhooks a write calls (pure), :mod:`.review` builds the
AdmissionReview and reads the answer (pure), :mod:`.calling` posts it over HTTPS, and
:mod:`.dispatching` keeps the configurations from a watch and runs the calls of each request.
"""

from controlplane.apiserver.webhooks.dispatching import RequestWebhooks, WebhookAdmission

__all__ = ["RequestWebhooks", "WebhookAdmission"]
