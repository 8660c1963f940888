"""kube's validators as pure functions: the kinds the hub does not serve through its own
table test (Pod, ReplicaSet, DaemonSet, CronJob), update ratcheting, and the formats."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from controlplane.apis.kube.cronschedule import schedule_error
from controlplane.apis.kube.field import go_label_selector, go_string_map, go_strings, show
from controlplane.apis.kube.validate_resources import parse, shown
from controlplane.apis.kube.validation import for_kind

Obj = dict[str, Any]


def template(**spec: Any) -> Obj:
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "main", "image": "i:1"}], **spec}}


def pod() -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": template()["spec"]}


def replica_set() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template()}}


def daemon_set() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template()}}


def cron_job() -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "*/5 * * * *",
                     "jobTemplate": {"spec": {"template": template(restartPolicy="OnFailure")}}}}


def errors_of(obj: Obj, old: Obj | None = None) -> list[tuple[str, str]]:
    group = obj["apiVersion"].rpartition("/")[0]
    validator = for_kind(group, obj["kind"])
    assert validator is not None
    return [(e.field, e.message) for e in validator(obj, old)]


CASES: list[tuple[str, Callable[[], Obj], Callable[[Obj], Any], str, str]] = [
    ("pod-no-containers", pod, lambda o: o["spec"].update(containers=[]), "spec.containers", "Required value"),
    ("pod-init-restart", pod, lambda o: o["spec"].update(initContainers=[{
        "name": "init", "image": "i:1", "restartPolicy": "OnFailure"}]),
     "spec.initContainers[0].restartPolicy", 'Unsupported value: "OnFailure": supported values: "Always"'),
    ("pod-init-name-clash", pod, lambda o: o["spec"].update(initContainers=[{"name": "main", "image": "i:1"}]),
     "spec.initContainers[0].name", 'Duplicate value: "main"'),
    ("pod-gate-twice", pod, lambda o: o["spec"].update(schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/a"}]),
     "spec.schedulingGates[1]", 'Duplicate value: "example.com/a"'),
    ("pod-gate-name", pod, lambda o: o["spec"].update(schedulingGates=[{"name": "bad name"}]),
     "spec.schedulingGates[0]", "Invalid value: \"bad name\": name part must consist of alphanumeric characters, '-', '_' or '.', "
     "and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("pod-gated-on-a-node", pod, lambda o: o["spec"].update(schedulingGates=[{"name": "example.com/a"}], nodeName="n1"),
     "spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been cleared"),
    ("pod-deadline", pod, lambda o: o["spec"].update(activeDeadlineSeconds=0),
     "spec.activeDeadlineSeconds", "Invalid value: 0: must be between 1 and 2147483647, inclusive"),
    ("pod-toleration-seconds", pod, lambda o: o["spec"].update(tolerations=[{
        "key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "spec.tolerations[0].effect", "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
     "`tolerationSeconds` is set"),
    ("pod-hugepages-alone", pod, lambda o: o["spec"]["containers"][0].update(resources={
        "limits": {"hugepages-2Mi": "2Mi"}}),
     "spec.containers[0].resources", "Forbidden: HugePages require cpu or memory"),
    ("pod-extended-name", pod, lambda o: o["spec"]["containers"][0].update(resources={
        "limits": {"example.com/Bad_Name!": 1}}),
     "spec.containers[0].resources.limits[example.com/Bad_Name!]",
     "Invalid value: \"example.com/Bad_Name!\": name part must consist of alphanumeric characters, '-', '_' or "
     "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
     "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("replicaset-selector", replica_set, lambda o: o["spec"].pop("selector"), "spec.selector", "Required value"),
    ("replicaset-deadline", replica_set, lambda o: o["spec"]["template"]["spec"].update(activeDeadlineSeconds=5),
     "spec.template.spec.activeDeadlineSeconds", "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"),
    ("daemonset-mismatch", daemon_set, lambda o: o["spec"]["template"]["metadata"].update(labels={"app": "y"}),
     "spec.template.metadata.labels",
     'Invalid value: map[string]string{"app":"y"}: `selector` does not match template `labels`'),
    ("daemonset-restart", daemon_set, lambda o: o["spec"]["template"]["spec"].update(restartPolicy="OnFailure"),
     "spec.template.spec.restartPolicy", 'Unsupported value: "OnFailure": supported values: "Always"'),
    ("daemonset-both-zero", daemon_set, lambda o: o["spec"].update(updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}),
     "spec.updateStrategy.rollingUpdate.maxUnavailable", "Required value: cannot be 0 when maxSurge is 0"),
    ("cronjob-schedule", cron_job, lambda o: o["spec"].update(schedule="61 * * * *"),
     "spec.schedule", 'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61'),
    ("cronjob-tz-in-schedule", cron_job, lambda o: o["spec"].update(schedule="CRON_TZ=UTC 0 * * * *"),
     "spec.schedule",
     'Invalid value: "CRON_TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead'),
    ("cronjob-time-zone", cron_job, lambda o: o["spec"].update(timeZone="Mars/Olympus"),
     "spec.timeZone", 'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'),
    ("cronjob-concurrency", cron_job, lambda o: o["spec"].update(concurrencyPolicy="Sometimes"),
     "spec.concurrencyPolicy", 'Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"'),
    ("cronjob-job-restart", cron_job, lambda o: o["spec"]["jobTemplate"]["spec"]["template"]["spec"].pop(
        "restartPolicy"),
     "spec.jobTemplate.spec.template.spec.restartPolicy",
     'Unsupported value: "Always": supported values: "OnFailure", "Never"'),
    ("cronjob-selector", cron_job, lambda o: o["spec"]["jobTemplate"]["spec"].update(
        selector={"matchLabels": {"app": "x"}}),
     "spec.jobTemplate.spec.selector",
     'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"x"}, '
     "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated"),
]


@pytest.mark.parametrize(("manifest", "breaking", "field_path", "message"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_kube_refuses_the_broken_manifest_and_takes_the_valid_one(
    manifest: Callable[[], Obj], breaking: Callable[[Obj], Any], field_path: str, message: str
) -> None:
    valid = manifest()
    assert errors_of(valid) == []
    broken = copy.deepcopy(valid)
    breaking(broken)
    assert (field_path, message) in errors_of(broken)


def test_daemon_set_selector_is_immutable() -> None:
    old = daemon_set()
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "x", "tier": "a"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "a"
    assert errors_of(new, old) == [(
        "spec.selector",
        'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"x", "tier":"a"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
    )]


def test_an_update_is_refused_only_for_errors_the_stored_object_lacks() -> None:
    stored = replica_set()
    stored["spec"]["replicas"] = -1
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert errors_of(relabelled, stored) == []
    worse = copy.deepcopy(stored)
    worse["spec"]["minReadySeconds"] = -5
    assert errors_of(worse, stored) == [
        ("spec.minReadySeconds", "Invalid value: -5: must be greater than or equal to 0")
    ]


def test_a_pods_scheduling_gates_may_only_be_removed() -> None:
    gated = pod()
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/a"}]
    one_left = copy.deepcopy(gated)
    one_left["spec"]["schedulingGates"] = [{"name": "example.com/a"}]
    assert errors_of(one_left, gated) == []
    ungated = copy.deepcopy(gated)
    del ungated["spec"]["schedulingGates"]
    assert errors_of(ungated, gated) == []
    assert errors_of(gated, ungated) == [
        ("spec.schedulingGates[0].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'kueue.x-k8s.io/admission'"),
        ("spec.schedulingGates[1].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/a'"),
    ]
    swapped = copy.deepcopy(gated)
    swapped["spec"]["schedulingGates"] = [{"name": "example.com/b"}]
    assert errors_of(swapped, gated) == [
        ("spec.schedulingGates[0].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/b'"),
    ]


def test_a_job_suspended_before_it_ran_may_change_its_scheduling_directives() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"suspend": True, "template": template(restartPolicy="Never")}}
    placed = copy.deepcopy(job)
    placed["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a100"}
    assert errors_of(placed, job) == []
    started = copy.deepcopy(job)
    started["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    assert [f for f, _ in errors_of(placed, started)] == ["spec.template"]
    rebuilt = copy.deepcopy(placed)
    rebuilt["spec"]["template"]["spec"]["containers"][0]["image"] = "i:2"
    assert [f for f, _ in errors_of(rebuilt, job)] == ["spec.template"]


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        ("*/5 * * * *", None), ("0 0 1 jan mon", None), ("@hourly", None), ("@every 5m", None),
        # robfig/cron prints the fields it found as Go prints a []string.
        ("0 0 * *", "expected exactly 5 fields, found 4: [0 0 * *]"),
        ("bad  sched", "expected exactly 5 fields, found 2: [bad sched]"),
        ("0 24 * * *", "end of range (24) above maximum (23): 24"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        # Go's duration syntax after "@every ", and its words for what it refuses.
        ("@every 1h30m", None), ("@every -5m", None),
        ("@every 5d", 'failed to parse duration @every 5d: time: unknown unit "d" in duration "5d"'),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
        ("@every  5m", 'failed to parse duration @every  5m: time: invalid duration " 5m"'),
        ("@hourly ", "unrecognized descriptor: @hourly "),
        (" @hourly", "expected exactly 5 fields, found 1: [@hourly]"),  # not trimmed
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("1,,2 * * * *", None),  # empty ranges are skipped
        ("*-5 * * * *", None),
        ("50/5 * * * *", None),  # N/step runs to the maximum
        ("70/5 * * * *", "beginning of range (70) beyond end of range (59): 70/5"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
        ("-1 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
        ("+5 * * * *", None),
        ("0 0 * JAN-mar SUN", None),
        ("99999999999999999999 * * * *", "failed to parse int from 99999999999999999999: strconv.Atoi: parsing "
                                         '"99999999999999999999": value out of range'),
    ],
)
def test_cron_schedules_read_as_robfig_cron_reads_them(schedule: str, error: str | None) -> None:
    assert schedule_error(schedule) == error


def test_bad_values_print_as_go_prints_them() -> None:
    assert show(-2) == "-2"
    assert show(True) == "true"
    assert show("a\"b") == '"a\\"b"'
    assert show(None) == "null"
    assert go_string_map({"b": "2", "a": "1"}).text == 'map[string]string{"a":"1", "b":"2"}'
    assert go_label_selector({"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}).text == (
        "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{"
        'v1.LabelSelectorRequirement{Key:"k", Operator:"In", Values:[]string{"v"}}}}'
    )


@pytest.mark.parametrize("garbage", [None, 7, "x", [1], {"spec": 3}, {"spec": {"template": []}},
                                     {"spec": {"template": {"spec": {"containers": [3, None]}}}}])
@pytest.mark.parametrize("kind", [("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
                                  ("batch", "Job"), ("batch", "CronJob"), ("", "Service"), ("", "Secret"),
                                  ("", "ConfigMap"), ("", "PersistentVolumeClaim"), ("", "Pod")])
def test_any_json_shape_gives_field_errors_not_exceptions(garbage: Any, kind: tuple[str, str]) -> None:
    validator = for_kind(*kind)
    assert validator is not None
    obj = garbage if isinstance(garbage, dict) else {"spec": garbage}
    validator(obj, obj)
    validator(obj, None)


def test_fields_kube_defaults_may_be_empty_or_absent() -> None:
    """kube's defaulters fill an empty enum, a zero targetPort and a missing template before
    validating; the hub reads them the same way."""
    rs = replica_set()
    rs["spec"]["template"]["spec"].update(restartPolicy="", dnsPolicy="")
    rs["spec"]["template"]["spec"]["containers"][0].update(
        imagePullPolicy="", terminationMessagePolicy="", ports=[{"containerPort": 80, "protocol": ""}]
    )
    assert errors_of(rs) == []
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"type": "", "ports": [{"port": 80, "targetPort": 0, "protocol": ""}]}}
    assert errors_of(service) == []
    bare = replica_set()
    del bare["spec"]["template"]
    assert errors_of(bare) == [
        ("spec.template.metadata.labels",
         "Invalid value: map[string]string(nil): `selector` does not match template `labels`"),
        ("spec.template.spec.containers", "Required value"),
    ]


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [("500m", "500m"), (0.5, "500m"), ("1.5", "1500m"), ("1000", "1k"), ("0", "0"), ("2048Mi", "2Gi"),
     ("1536Mi", "1536Mi"), ("1.5Ki", "1536"), ("-1Gi", "-1Gi"), ("1e3", "1e3"), ("0.0001", "100u")],
)
def test_quantities_in_messages_are_canonical(raw: Any, canonical: str) -> None:
    value = parse(raw)
    assert value is not None
    assert shown(raw, value) == canonical


@pytest.mark.parametrize(("raw", "value"), [("Ki", 0), ("m", 0), ("10 Gi", None), ("1_000", None)])
def test_validation_reads_a_quantity_as_kubes_parser(raw: str, value: int | None) -> None:
    """A suffix alone is kube's zero (no digits read as 0), not a format error."""
    assert parse(raw) == value


@pytest.mark.parametrize(("values", "type_name", "printed"), [
    (["a", "b"], "string", '[]string{"a", "b"}'),
    ([], "string", "[]string{}"),
    (None, "string", "[]string(nil)"),
    (["CREATE"], "v1alpha1.InterpreterOperation", '[]v1alpha1.InterpreterOperation{"CREATE"}'),
])
def test_a_list_of_strings_as_gos_percent_hash_v(values: list[str] | None, type_name: str, printed: str) -> None:
    """One printer of ``[]string`` for every rule that shows one (finalizers, clusterIPs, webhook
    rules, dryRun, scope selectors, label selectors): a nil slice is not an empty one in Go."""
    assert go_strings(values, type_name).text == printed
