"""Admission webhooks configured by ValidatingWebhookConfiguration and MutatingWebhookConfiguration
objects, called for users' writes as kube-apiserver calls them, and the ValidatingAdmissionPolicies
bound by ValidatingAdmissionPolicyBindings, run where the validating webhooks run.

:mod:`.matching` decides which webhooks (and policies) a write selects (pure), :mod:`.expressions`
compiles and matches their CEL ``matchConditions`` (pure), :mod:`.policies` compiles and evaluates
the policies (pure), :mod:`.enforcing` runs the bound ones for a write, :mod:`.params` reads a
binding's params, :mod:`.review` builds the
AdmissionReview, reads the answer and words the refusals (pure), :mod:`.calling` posts it over
HTTPS, and :mod:`.dispatching` keeps the configurations, policies and bindings from a watch and runs
the calls and policies of each request. :mod:`.interpreting` keeps Karmada's
ResourceInterpreterWebhookConfigurations from a watch and calls their webhooks with the same client.
"""

from controlplane.apiserver.webhooks.dispatching import RequestWebhooks, WebhookAdmission

__all__ = ["RequestWebhooks", "WebhookAdmission"]
