"""Host interference from /proc: others' CPU is the host's busy time minus servebook's own processes."""

import os

from servebook.measure.observers.host import CpuSample, cpu_sample, foreign_cores

TICK = os.sysconf("SC_CLK_TCK")


def fake_proc(root, busy_ticks: int, processes: dict[int, tuple[int, int]]):
    """A /proc with a /proc/stat of `busy_ticks` user time and `processes` {pid: (ppid, cpu ticks)}."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  {busy_ticks} 0 0 1000000 5 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    for pid, (ppid, ticks) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(
            f"{pid} (name with) spaces) S {ppid} 0 0 0 0 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 0 0 0\n")
    return root


def test_the_engine_tree_and_this_process_are_ours_and_the_rest_is_foreign(tmp_path):
    me = os.getpid()
    before = cpu_sample(100, fake_proc(tmp_path / "a", 1000, {me: (1, 100), 100: (1, 200), 101: (100, 50),
                                                              300: (1, 10)}))
    after = cpu_sample(100, fake_proc(tmp_path / "b", 1000 + 4 * TICK, {me: (1, 100 + TICK), 100: (1, 200 + TICK),
                                                                        101: (100, 50 + TICK), 300: (1, 10 + TICK)}))
    after = CpuSample(before.t + 2.0, after.host_busy_s, after.own_s)
    # 4 s of busy CPU in 2 s; 3 s of it ours (client, engine, engine's child): 1 s foreign over 2 s = 0.5 cores
    assert abs(foreign_cores(before, after) - 0.5) < 1e-9


def test_no_proc_stat_means_not_checked(tmp_path):
    sample = CpuSample(0.0, None, 0.0)
    assert foreign_cores(sample, CpuSample(1.0, None, 0.0)) is None


def test_the_hypervisors_steal_is_read_apart_as_a_covariate(tmp_path):
    from servebook.measure.observers.host import cpu_probe_ms, steal_cores

    def stat(root, steal_ticks):
        root.mkdir(parents=True, exist_ok=True)
        (root / "stat").write_text(f"cpu  1000 0 0 1000000 5 0 0 {steal_ticks} 0 0\n")
        return root

    before = cpu_sample(None, stat(tmp_path / "a", 10))
    after = cpu_sample(None, stat(tmp_path / "b", 10 + TICK))
    after = CpuSample(before.t + 4.0, after.host_busy_s, after.own_s, after.steal_s)
    assert abs(steal_cores(before, after) - 0.25) < 1e-9, "1 s taken over 4 s"
    assert steal_cores(CpuSample(0.0, None, 0.0), CpuSample(1.0, None, 0.0)) is None
    assert 0 < cpu_probe_ms(2_000) < 1_000


def test_the_cpu_of_each_engine_processs_busiest_thread_is_recorded(tmp_path):
    from servebook.measure.observers.host import busiest_thread_cpus

    proc = fake_proc(tmp_path, 1000, {100: (1, 0), 101: (100, 0)})

    def thread(pid, tid, ticks, cpu):
        (proc / str(pid) / "task" / str(tid)).mkdir(parents=True, exist_ok=True)
        tail = " ".join(["0"] * 24)  # fields 16 to 38 and the processor, field 39, last
        (proc / str(pid) / "task" / str(tid) / "stat").write_text(
            f"{tid} (VLLM::Engine Core) S {pid} 0 0 0 0 0 0 0 0 0 {ticks} 0 {tail[:-1]}{cpu}\n")

    thread(100, 100, 50, 3)      # the API server's main thread
    thread(100, 102, 5, 9)
    thread(101, 101, 900, 11)    # the engine core's busy step loop
    thread(101, 103, 1, 0)
    assert busiest_thread_cpus(100, proc) == "3,11"
    assert busiest_thread_cpus(None, proc) is None
    # during a cell: a process whose threads did not run is left out (its last CPU predates the cell)
    from servebook.measure.observers.host import thread_ticks

    start = thread_ticks(100, proc)
    thread(101, 101, 950, 5)     # the engine core stepped, now on CPU 5
    assert busiest_thread_cpus(100, proc, since=start) == "5"
    thread(100, 102, 45, 9)      # the API server's second thread ran the most during the cell
    assert busiest_thread_cpus(100, proc, since=start) == "5,9"


def test_a_resident_rounds_other_seats_are_the_rounds_own_load_and_kept_apart(tmp_path):
    from servebook.measure.observers.host import seated_cores

    me = os.getpid()
    # 100: the measured engine; 400 and its engine 401: another seat, idle but polling (an SGLang scheduler)
    tree = {me: (1, 100), 100: (1, 200), 400: (1, 30), 401: (400, 300)}
    before = cpu_sample(100, fake_proc(tmp_path / "a", 1000, tree), also_own={400, 401})
    busier = {me: (1, 100 + TICK), 100: (1, 200 + TICK), 400: (1, 30), 401: (400, 300 + 2 * TICK)}
    after = cpu_sample(100, fake_proc(tmp_path / "b", 1000 + 4 * TICK, busier), also_own={400, 401})
    after = CpuSample(before.t + 2.0, after.host_busy_s, after.own_s, after.steal_s, after.seated_s)
    # 4 s busy: 2 s ours, 2 s the other seat's: nothing foreign, the seat's 1 core kept beside
    assert abs(foreign_cores(before, after)) < 1e-9
    assert abs(seated_cores(before, after) - 1.0) < 1e-9
    # the same load with the seat not declared is foreign
    alone = [cpu_sample(100, fake_proc(tmp_path / d, t, p)) for d, t, p in (("a", 1000, tree), ("b", 1000 + 4 * TICK, busier))]
    later = CpuSample(alone[0].t + 2.0, alone[1].host_busy_s, alone[1].own_s)
    assert abs(foreign_cores(alone[0], later) - 1.0) < 1e-9
    assert seated_cores(alone[0], later) is None


def test_an_idle_seat_is_zero_cores_not_unchecked(tmp_path):
    from servebook.measure.observers.host import seated_cores

    tree = {os.getpid(): (1, 100), 100: (1, 200), 400: (1, 30)}
    before = cpu_sample(100, fake_proc(tmp_path / "a", 1000, tree), also_own={400})
    after = cpu_sample(100, fake_proc(tmp_path / "b", 1000, tree), also_own={400})
    after = CpuSample(before.t + 1.0, after.host_busy_s, after.own_s, after.steal_s, after.seated_s)
    assert seated_cores(before, after) == 0.0


def seats_proc(root, cpus: int, processes: dict[int, tuple[int, str]]):
    """A /proc of a host with `cpus` CPUs and `processes` {pid: (cpu ticks, the CPUs it may run on, "5-7")}."""
    fake_proc(root, 0, {pid: (1, ticks) for pid, (ticks, _) in processes.items()})
    (root / "stat").write_text("cpu  0 0 0 0 0 0 0 0\n" + "".join(f"cpu{i} 0 0 0 0 0 0 0 0\n" for i in range(cpus)))
    for pid, (_, allowed) in processes.items():
        (root / str(pid) / "status").write_text(f"Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t{allowed}\n")
    return root


def test_seats_held_to_the_engines_cpus_contend_only_while_it_measures(tmp_path):
    from servebook.measure.observers.host import SeatContention

    clock = iter([0.0, 2.0, 10.0, 12.0]).__next__
    # 100: the measured engine, held to CPUs 5-7 of 16; 400 polls on the same three; 500 may run on 4-7 (three
    # quarters of its load taken as on the engine's CPUs); 600 is held elsewhere
    held = {100: (0, "5-7"), 400: (0, "5-7"), 500: (0, "4-7"), 600: (0, "0-3")}
    proc = seats_proc(tmp_path / "p", 16, held)
    meter = SeatContention(100, {400, 500, 600}, proc, clock)
    assert meter.weights == {400: 1.0, 500: 0.75}
    meter.resume()  # t=0
    seats_proc(proc, 16, {**held, 400: (TICK, "5-7"), 500: (2 * TICK, "4-7"), 600: (2 * TICK, "0-3")})
    meter.pause()  # t=2: 1 s + 0.75 x 2 s of the engine's CPUs in 2 s
    # between the slices the other seats measure, on their own turn: none of it counts
    seats_proc(proc, 16, {**held, 400: (9 * TICK, "5-7"), 500: (2 * TICK, "4-7")})
    meter.resume()  # t=10
    seats_proc(proc, 16, {**held, 400: (10 * TICK, "5-7"), 500: (2 * TICK, "4-7")})
    meter.pause()  # t=12: 1 s more in 2 s
    assert abs(meter.cores() - (1 + 1.5 + 1) / 4) < 1e-9


def test_an_engine_that_may_run_anywhere_has_no_contending_seats(tmp_path):
    from servebook.measure.observers.host import SeatContention

    proc = seats_proc(tmp_path / "p", 4, {100: (0, "0-3"), 400: (0, "0-1")})
    meter = SeatContention(100, {400}, proc, iter([0.0, 1.0]).__next__)
    meter.resume()
    meter.pause()
    assert meter.weights == {} and meter.cores() == 0.0
    # no other seats (not a resident round), or an engine servebook did not start: not checked
    assert SeatContention(100, set(), proc).cores() is None
    assert SeatContention(None, {400}, proc).cores() is None


def test_the_probe_runs_on_the_cpus_the_engine_is_held_to_and_the_client_is_freed_after(tmp_path):
    import os
    import subprocess
    import sys

    import pytest

    from servebook.measure.observers.host import engine_cpu_probe_ms

    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("one CPU: an engine cannot be held to fewer than the client has")
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert engine_cpu_probe_ms(engine.pid) is None  # not held: no CPUs of its own to time
        os.sched_setaffinity(engine.pid, {min(mine)})
        probe = engine_cpu_probe_ms(engine.pid, rounds=2_000)
        assert probe is not None and 0 < probe < 1_000
        assert os.sched_getaffinity(0) == mine
    finally:
        engine.kill()
        engine.wait()
    assert engine_cpu_probe_ms(engine.pid) is None and engine_cpu_probe_ms(None) is None


def test_the_foreign_limit_is_half_the_cores_the_run_left_idle_within_its_bounds():
    from servebook.measure.observers.host import DEFAULT_MAX_FOREIGN_CORES, MIN_FOREIGN_CORES, ForeignLimit

    # the 2-core machine, llama.cpp and the client using 1.3 cores: 0.7 idle, so 0.35 may be others'
    assert abs(ForeignLimit.of(None, 1.3, 2).cores - 0.35) < 1e-9
    # a 16-core GPU host, vLLM using 1.5: the fixed ceiling holds, as before
    assert ForeignLimit.of(None, 1.5, 16).cores == DEFAULT_MAX_FOREIGN_CORES
    # a run using every core still tolerates the host's own housekeeping
    assert ForeignLimit.of(None, 2.3, 2).cores == MIN_FOREIGN_CORES
    # unknown use or host: the default; the plan's own figure always wins
    assert ForeignLimit.of(None, None, 2).cores == DEFAULT_MAX_FOREIGN_CORES
    assert ForeignLimit.of(0.8, 1.7, 2).cores == 0.8 and "plan" in ForeignLimit.of(0.8, 1.7, 2).basis


def test_own_cores_are_the_runs_cpu_over_the_wall_time():
    from servebook.measure.observers.host import own_cores

    before, after = CpuSample(10.0, 100.0, 50.0), CpuSample(12.0, 104.0, 53.4)
    assert abs(own_cores(before, after) - 1.7) < 1e-9
    assert own_cores(before, CpuSample(10.0, 100.0, 50.0)) is None
