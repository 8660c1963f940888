from __future__ import annotations

import pytest

from simulator.whatif.trace import Job, TraceError, TraceFormat, parse_trace

OPENB_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def test_openb_rows_become_jobs() -> None:
    fmt, jobs = parse_trace(
        [
            OPENB_HEADER,
            "p1,12000,16384,1,1000,,LS,Running,100,700,160",
            "p0,6000,8192,1,460,V100M16|V100M32,LS,Pending,50,90,",
            "p2,4000,0,0,0,,BE,Failed,100,100,100",
            "p3,96000,0,8,1000,G2,LS,Running,0,10,0",
        ]
    )
    assert fmt is TraceFormat.OPENB
    assert [j.name for j in jobs] == ["p3", "p0", "p1", "p2"]
    p0 = jobs[1]
    assert (p0.num_gpu, p0.gpu_milli, p0.fractional, p0.gpus) == (1, 460, True, 0.46)
    assert p0.gpu_products == ("Tesla-V100-SXM2-16GB", "Tesla-V100-SXM2-32GB")
    assert p0.duration_s == 40  # pending: deletion - creation
    assert jobs[2].duration_s == 540  # deletion - scheduled
    assert jobs[3].duration_s == 1  # never below one second
    assert jobs[0].gpu_milli_total == 8000 and jobs[0].gpu_products == ("Alibaba-G2",)


def test_generic_rows_become_jobs() -> None:
    fmt, jobs = parse_trace(
        [
            "name,submit_s,duration_s,gpus,cpu_milli,memory_mib,gpu_models,cluster",
            "a,10,60,0.25,1000,2048,Tesla-T4,east",
            "b,0,30,4,,,,",
            "c,5,30,0,500,,,",
        ]
    )
    assert fmt is TraceFormat.GENERIC
    by_name = {j.name: j for j in jobs}
    assert by_name["a"] == Job("a", 10, 60, 1, 250, 1000, 2048, ("Tesla-T4",), "east", line=2)
    assert (by_name["b"].num_gpu, by_name["b"].gpu_milli, by_name["b"].home_cluster) == (4, 1000, None)
    assert (by_name["c"].num_gpu, by_name["c"].gpus) == (0, 0)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            ["name,submit_s,duration_s,gpus", "a,0,10,1", "b,x,10,1"],
            "line 3: column submit_s: 'x' is not a number",
        ),
        (["name,submit_s,duration_s,gpus", "a,0,10,1.5"], "line 2: column gpus: 1.5 GPUs"),
        (["name,submit_s,duration_s,gpus", "a,0,0,1"], "line 2: column duration_s must be more than 0"),
        (
            ["name,submit_s,duration_s,gpus", "a,0,5,1", "a,1,5,1"],
            "line 3: job name 'a' is used again (first on line 2)",
        ),
        (
            ["name,submit_s,duration_s,gpus", "a,0,5,0.0005"],
            "line 2: column gpus: 0.0005 has more than three decimals",
        ),
        (["name,submit_s,duration_s,gpus", "a,0,5,1,extra"], "line 2: more fields than the header"),
        (
            [OPENB_HEADER, "p,1,1,2,500,,LS,Running,0,5,0"],
            "line 2: a share of a GPU (gpu_milli 500) is only possible",
        ),
        (
            [OPENB_HEADER, "p,1,1,1,1000,H100,LS,Running,0,5,0"],
            "line 2: column gpu_spec: unknown GPU model 'H100'",
        ),
        (
            [OPENB_HEADER, "p,1,1,1,1000,,LS,Running,9,5,0"],
            "line 2: deletion_time 5 is before creation_time 9",
        ),
        ([OPENB_HEADER, "p,-1,1,1,1000,,LS,Running,0,5,0"], "line 2: column cpu_milli: '-1' is negative"),
        (["id,when"], "line 1: the header lacks column(s) name,submit_s,duration_s,gpus of a generic trace"),
        (["name,cpu_milli,num_gpu"], "line 1: the header lacks column(s) memory_mib,gpu_milli of an openb pod list"),
        ([], "line 1: the trace is empty"),
    ],
)
def test_bad_rows_name_the_line(lines: list[str], message: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace(lines)
    assert message in str(caught.value)
