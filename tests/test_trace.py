"""NPUEMU_TRACE=FILE.json (emulator.trace, docs/trace.md): the file is Chrome's Trace Event JSON, read
back here with `json`: a process per device with a track per stream and a slice per task, a host
process with a track per host thread and a slice per public call, flow arrows from each event record to
the waits on it and from each launching call to its task, the sanitizer's reports as instants. Written
at exit from Python and C programs, and when the path changes or tracing stops."""
import json
import os
import random
import re
import subprocess
import sys
import textwrap

import pytest

import ctoolkit
import emulator
from emulator import hooks, trace

PYTHON_PROGRAM = textwrap.dedent('''\
    import json
    import threading
    import numpy as np
    import acl
    import aclnn_api as nn

    H2D, D2H = 1, 2
    acl.init()
    acl.rt.set_device(0)
    context, ret = acl.rt.get_context()
    first, ret = acl.rt.create_stream()
    second, ret = acl.rt.create_stream()
    event, ret = acl.rt.create_event()
    x = np.arange(1, 5, dtype=np.float32)
    ones = np.ones_like(x)
    out = np.empty_like(x)
    dev = [acl.rt.malloc(x.nbytes, 0)[0] for _ in range(4)]
    acl.rt.memcpy_async(dev[0], x.nbytes, acl.util.numpy_to_ptr(ones), x.nbytes, H2D, first)  # COPY 1
    acl.rt.memcpy_async(dev[1], x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, H2D, first)     # COPY 2
    acl.rt.record_event(event, first)                                                         # RECORD
    tensors = [nn.aclCreateTensor([2, 2], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, d) for d in dev]


    def worker():
        acl.rt.set_context(context)
        acl.rt.stream_wait_event(second, event)                                               # WAIT
        ws, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[1], tensors[2])
        nn.aclnnLogSigmoidBackward(None, ws, executor, second)                                # KERNEL
        acl.rt.memcpy_async(acl.util.numpy_to_ptr(out), out.nbytes, dev[2], out.nbytes, D2H, second)
        print("worker sync", acl.rt.synchronize_stream(second))


    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    thread.join()
    print("malloc(0)", acl.rt.malloc(0, 0)[1])  # a failing call: its code and message are in the trace
    # a kernel that reads memory freed before it ran: a device fault, reported by memcheck
    ws, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[3], tensors[3], tensors[2])
    nn.aclnnLogSigmoidBackward(None, ws, executor, first)                                     # FAULTING
    acl.rt.free(dev[3])
    print("faulting sync", acl.rt.synchronize_stream(first))
    for t in tensors:
        nn.aclDestroyTensor(t)
    for d in dev[:3]:
        acl.rt.free(d)
    print(json.dumps({"first": first, "second": second, "result": out.tolist()}))
    acl.rt.destroy_event(event)
    acl.rt.destroy_stream(first)
    acl.rt.destroy_stream(second)
    acl.rt.reset_device(0)
    acl.finalize()
''')

C_PROGRAM = textwrap.dedent('''\
    #include <cstdio>
    #include <thread>
    #include "acl/acl.h"

    int main() {
        aclInit(nullptr);
        aclrtSetDevice(0);
        aclrtContext context;
        aclrtGetCurrentContext(&context);
        aclrtStream first, second;
        aclrtCreateStream(&first);
        aclrtCreateStream(&second);
        aclrtEvent event;
        aclrtCreateEvent(&event);
        float host[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
        void *a = nullptr, *b = nullptr;
        aclrtMalloc(&a, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMalloc(&b, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMemcpyAsync(a, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE, first);
        aclrtRecordEvent(event, first);
        aclrtStreamWaitEvent(second, event);
        aclrtMemcpyAsync(b, sizeof host, a, sizeof host, ACL_MEMCPY_DEVICE_TO_DEVICE, second);
        std::thread worker([&] {
            aclrtSetCurrentContext(context);
            aclrtMemcpyAsync(back, sizeof back, b, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST, second);
            aclrtSynchronizeStream(second);
        });
        worker.join();
        printf("%g %g %g %g %p %p\\n", back[0], back[1], back[2], back[3], first, second);
        aclrtFree(a);
        aclrtFree(b);
        aclrtDestroyEvent(event);
        aclrtDestroyStream(first);
        aclrtDestroyStream(second);
        aclrtResetDevice(0);
        aclFinalize();
        return 0;
    }
''')


def run_python(source: str, directory, **env: str) -> subprocess.CompletedProcess:
    path = os.path.join(str(directory), "program.py")
    with open(path, "w", encoding="utf-8") as file:
        file.write(source)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}
    environment.update(NPUEMU_EXECUTION="async", NPUEMU_SANITIZE="full", **env)
    return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=60,
                          env=environment, cwd=str(directory))


def line_of(source: str, marker: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if "# " + marker in line)


def nanoseconds(slice_: dict) -> tuple:
    """A slice's begin and end in whole nanoseconds, as Perfetto reads them (ts * 1000, truncated)."""
    begin = int(slice_["ts"] * 1000)
    return begin, begin + int(slice_["dur"] * 1000)


def microseconds(slice_: dict) -> tuple:
    """A slice's begin and end in the file's own numbers, as chrome://tracing adds them (floats)."""
    return slice_["ts"], slice_["ts"] + slice_["dur"]


class Trace:
    """A trace file, indexed: names of processes and threads, slices by track, flows and instants."""

    def __init__(self, path: str):
        with open(path, encoding="utf-8") as file:
            self.data = json.load(file)
        assert set(self.data) == {"traceEvents", "displayTimeUnit", "otherData"}
        assert self.data["displayTimeUnit"] == "ms"
        self.events = self.data["traceEvents"]
        meta = [e for e in self.events if e["ph"] == "M"]
        self.processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
        self.threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
        self.slices: dict = {}
        for event in self.events:
            if event["ph"] == "X":
                self.slices.setdefault((event["pid"], event["tid"]), []).append(event)
        for found in self.slices.values():
            found.sort(key=lambda e: e["ts"])
        self.flows = [e for e in self.events if e["ph"] in ("s", "f")]
        self.instants = [e for e in self.events if e["ph"] == "i"]

    def pid(self, name: str) -> int:
        return next(pid for pid, found in self.processes.items() if found == name)

    def track(self, pid: int, name: str) -> tuple:
        """The (pid, tid) of the thread track of `pid` whose name starts with `name`."""
        found = [key for key, value in self.threads.items() if key[0] == pid and value.startswith(name)]
        assert len(found) == 1, (name, self.threads)
        return found[0]

    def names(self, track: tuple) -> list:
        return [e["name"] for e in self.slices.get(track, [])]

    def enclosing(self, track: tuple, ts: float) -> list:
        """The slices of `track` that hold `ts` (a flow binds to the innermost)."""
        return [e for e in self.slices.get(track, []) if e["ts"] <= ts <= e["ts"] + e["dur"]]

    def check_well_formed(self) -> None:
        """Every event has its fields; times are >= 0 and start at 0; slices of a track nest or follow
        one another; every flow start has one finish with the same id, category and name."""
        times = [e["ts"] for e in self.events if e["ph"] != "M"]
        assert min(times) == 0 and all(t >= 0 for t in times)
        for event in self.events:
            assert {"ph", "name", "pid", "tid"} <= set(event), event
            assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
            if event["ph"] == "X":
                assert event["dur"] >= 0 and "cat" in event and isinstance(event["args"], dict)
        for key, found in self.slices.items():
            assert key in self.threads, "a slice on an unnamed track %s" % (key,)
            for bounds in (nanoseconds, microseconds):
                open_ends = []
                for event in found:
                    begin, end = bounds(event)
                    while open_ends and open_ends[-1] <= begin:
                        open_ends.pop()
                    assert not open_ends or end <= open_ends[-1], "slices overlap on %s: %s" % (key, event)
                    open_ends.append(end)
        starts = {e["id"]: e for e in self.flows if e["ph"] == "s"}
        ends = {e["id"]: e for e in self.flows if e["ph"] == "f"}
        assert len(starts) + len(ends) == len(self.flows), "a flow id used twice"
        assert set(starts) == set(ends)
        for flow, end in ends.items():
            assert (starts[flow]["cat"], starts[flow]["name"]) == (end["cat"], end["name"])
            assert end["bp"] == "e" and starts[flow]["ts"] <= end["ts"]
            assert self.enclosing((end["pid"], end["tid"]), end["ts"]), "a flow end outside any slice: %s" % end
            start = starts[flow]
            assert self.enclosing((start["pid"], start["tid"]), start["ts"]), "a flow start outside any slice"

    def flow_into(self, slice_: dict, category: str) -> dict:
        """The start of the flow of `category` that ends in `slice_`."""
        for end in self.flows:
            if (end["ph"] == "f" and end["cat"] == category
                    and (end["pid"], end["tid"]) == (slice_["pid"], slice_["tid"])
                    and slice_["ts"] <= end["ts"] <= slice_["ts"] + slice_["dur"]):
                return next(e for e in self.flows if e["ph"] == "s" and e["id"] == end["id"])
        raise AssertionError("no %s flow into %s" % (category, slice_))


def test_a_python_program_gives_tracks_per_stream_and_thread_flows_and_reports(tmp_path):
    path = str(tmp_path / "out" / "trace.json")
    os.mkdir(str(tmp_path / "out"))
    done = run_python(PYTHON_PROGRAM, tmp_path, NPUEMU_TRACE=path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worker sync 0" in done.stdout and "faulting sync 507015" in done.stdout, done.stdout
    handles = json.loads(done.stdout.splitlines()[-1])
    assert os.listdir(str(tmp_path / "out")) == ["trace.json"]  # no temporary file left beside it
    found = Trace(path)
    found.check_well_formed()

    # processes: the host, then one per device named with its chip
    host, npu = found.pid("host"), found.pid("NPU 0 (Ascend910B)")
    assert found.data["otherData"]["soc"] == "Ascend910B" and found.data["otherData"]["dropped_events"] == 0

    # a track per stream, named by its handle, holding its tasks in stream order
    first = found.track(npu, "stream 0x%x" % handles["first"])
    second = found.track(npu, "stream 0x%x" % handles["second"])
    names = found.names(first)
    assert names[:2] == ["aclrtMemcpyAsync(16 bytes)"] * 2 and names[3:] == ["aclnnLogSigmoidBackward"]
    assert names[2].startswith("aclrtRecordEvent(0x")
    assert found.names(second)[0] == found.names(first)[2].replace("aclrtRecordEvent", "aclrtStreamWaitEvent")
    assert found.names(second)[1:] == ["aclnnLogSigmoidBackward", "aclrtMemcpyAsync(16 bytes)"]
    for track in (first, second):
        slices = found.slices[track]
        assert all(int(a["ts"] * 1000) + int(a["dur"] * 1000) <= int(b["ts"] * 1000)  # one after another
                   for a, b in zip(slices, slices[1:]))
    copy, _, record, faulting = found.slices[first]
    wait, kernel, back = found.slices[second]
    assert copy["cat"] == "copy" and record["cat"] == "event" and kernel["cat"] == "kernel"
    assert copy["args"]["bytes_written"] == 16 and copy["args"]["bytes_read"] == 0
    assert back["args"]["bytes_read"] == 16 and back["args"]["bytes_written"] == 0
    assert kernel["args"]["self"] == "FLOAT[2, 2]" and kernel["args"]["gradInput"] == "FLOAT[2, 2]"
    assert kernel["args"]["bytes_read"] == 32 and kernel["args"]["bytes_written"] == 16
    assert kernel["dur"] > 0 and kernel["args"]["measured_us"] > 0
    assert kernel["args"]["launch_site"].startswith("%s:%d in worker" % (tmp_path / "program.py",
                                                                         line_of(PYTHON_PROGRAM, "KERNEL")))
    assert copy["args"]["launch_site"] == "%s:%d in <module>" % (tmp_path / "program.py",
                                                                 line_of(PYTHON_PROGRAM, "COPY 1"))
    assert "fault" not in kernel["args"]
    assert faulting["args"]["fault"].startswith("AI Core exception (507015)")
    assert record["dur"] == 0 and wait["dur"] == 0 and wait["args"]["waits_for"].startswith(record["name"])

    # host calls on a track per host thread, with their status
    main, worker = found.track(host, "MainThread (tid "), found.track(host, "worker (tid ")
    assert found.names(main)[:2] == ["aclInit", "aclrtSetDevice"]
    assert found.names(main)[-1] == "aclFinalize"
    assert found.names(worker) == ["aclrtSetCurrentContext", "aclrtStreamWaitEvent",
                                   "aclnnLogSigmoidBackwardGetWorkspaceSize", "aclnnLogSigmoidBackward",
                                   "aclrtMemcpyAsync", "aclrtSynchronizeStream"]
    calls = {e["name"]: e for e in found.slices[worker]}
    assert calls["aclrtSynchronizeStream"]["args"]["return"] == 0
    assert calls["aclrtStreamWaitEvent"]["args"]["arguments"] == "0x%x, %s" % (
        handles["second"], calls["aclrtStreamWaitEvent"]["args"]["arguments"].split(", ")[1])
    failed = next(e for e in found.slices[main] if e["name"] == "aclrtMalloc" and e["args"]["return"])
    assert failed["args"]["return"] == 100000 and failed["args"]["status"] == "ACL_ERROR_INVALID_PARAM"
    assert "size" in failed["args"]["message"]
    synchronized = [e for e in found.slices[main] if e["name"] == "aclrtSynchronizeStream"]
    assert [e["args"]["return"] for e in synchronized] == [507015]

    # the record -> wait flow, across streams, from the record's slice to the wait's
    start = found.flow_into(wait, "sync")
    assert (start["pid"], start["tid"]) == first and start["ts"] == record["ts"]
    # each task's launch flow starts in the call that queued it, on the thread that called
    for slice_, thread, call in ((kernel, worker, "aclnnLogSigmoidBackward"), (copy, main, "aclrtMemcpyAsync"),
                                 (wait, worker, "aclrtStreamWaitEvent"), (record, main, "aclrtRecordEvent")):
        start = found.flow_into(slice_, "launch")
        assert (start["pid"], start["tid"]) == thread
        assert [e["name"] for e in found.enclosing(thread, start["ts"])] == [call]
        assert start["ts"] <= slice_["ts"]  # the device starts a task once the host has issued it

    # the sanitizer's findings as instants: the device fault, found by memcheck
    reports = [e for e in found.instants if e["cat"] == "sanitizer"]
    assert reports and all(e["s"] in ("g", "p", "t") for e in reports)
    fault = next(e for e in reports if e["args"]["tool"] == "memcheck")
    assert fault["name"] == "memcheck: %s" % fault["args"]["kind"]
    assert "AI Core exception" in fault["args"]["message"]
    assert any("program.py:%d" % line_of(PYTHON_PROGRAM, "FAULTING") in site for site in fault["args"]["sites"])
    assert faulting["ts"] <= fault["ts"]


def test_a_c_program_writes_the_trace_at_its_exit(tmp_path):
    ctoolkit.require_compilers()
    executable = ctoolkit.compile_program(C_PROGRAM, tmp_path, "traced", flags=("-pthread", "-g"))
    path = str(tmp_path / "c.json")
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(NPUEMU_TRACE=path),
                                args=("--run", "", os.fsdecode(b"caf\xe9")))  # not UTF-8: as Python's own argv
    assert done.returncode == 0, done.stdout + done.stderr
    with open(path, encoding="utf-8") as file:
        assert json.load(file)["otherData"]["argv"] == executable + " --run  caf\\xe9", "the C program's command line"
    values = done.stdout.split()
    assert values[:4] == ["1", "2", "3", "4"]
    first, second = (int(value, 16) for value in values[4:6])
    found = Trace(path)
    found.check_well_formed()
    host, npu = found.pid("host"), found.pid("NPU 0 (Ascend910B)")
    main = found.track(host, "MainThread (tid ")
    other = found.track(host, "host thread (tid ")  # a thread the C program made
    assert found.names(other) == ["aclrtSetCurrentContext", "aclrtMemcpyAsync", "aclrtSynchronizeStream"]
    assert found.names(main)[0] == "aclInit" and found.names(main)[-1] == "aclFinalize"
    first_track = found.track(npu, "stream 0x%x" % first)
    second_track = found.track(npu, "stream 0x%x" % second)
    assert found.names(first_track)[0] == "aclrtMemcpyAsync(16 bytes)"
    record, wait = found.slices[first_track][1], found.slices[second_track][0]
    assert record["name"].startswith("aclrtRecordEvent") and wait["name"].startswith("aclrtStreamWaitEvent")
    start = found.flow_into(wait, "sync")
    assert (start["pid"], start["tid"]) == first_track
    copy = found.slices[first_track][0]
    assert copy["args"]["launch_site"] == "%s:19 in main" % (tmp_path / "traced.cpp")
    assert found.flow_into(found.slices[second_track][-1], "launch")["tid"] == other[1]


def test_names_that_are_not_utf8_are_written_as_escapes_in_valid_unicode(tmp_path):
    """A script named with the Latin-1 byte 0xE9: its name was a lone surrogate (\\udce9) in the launch sites,
    the reports and the command line, which a strict reader refuses and a UTF-8 encoder cannot write."""
    name = os.fsdecode(b"caf\xe9.py")
    (tmp_path / name).write_text("import acl\nacl.init()\nacl.rt.set_device(0)\nstream, _ = acl.rt.create_stream()\n"
                                 "memory, _ = acl.rt.malloc(64, 0)\nacl.rt.memset_async(memory, 64, 0, 64, stream)\n"
                                 "acl.rt.synchronize_stream(stream)\n")
    path = tmp_path / "trace.json"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}
    done = subprocess.run([sys.executable, name], capture_output=True, timeout=60, cwd=str(tmp_path),
                          env=dict(environment, NPUEMU_TRACE=str(path)))
    assert done.returncode == 0, done.stderr
    text = path.read_bytes().decode("utf-8")
    data = json.loads(text)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no lone surrogate left anywhere
    assert data["otherData"]["argv"] == "caf\\xe9.py"
    shown = os.path.join(str(tmp_path), "caf\\xe9.py")  # as Python names the script run: its absolute path
    (memset,) = [e for e in data["traceEvents"] if e["name"].startswith("aclrtMemsetAsync(")]
    assert memset["args"]["launch_site"] == shown + ":6 in <module>"
    (leak,) = [e["args"] for e in data["traceEvents"] if e.get("cat") == "sanitizer" and "memory" in e["args"]["message"]]
    assert shown + ":5 in <module>" in leak["message"], leak
    assert leak["sites"] == ["made at %s:5 in <module>" % shown], leak


def test_an_unwritable_path_is_one_message_and_the_program_ends_as_it_would(tmp_path):
    path = str(tmp_path / "missing" / "trace.json")
    done = run_python("import acl\nacl.init()\nacl.rt.set_device(0)\nacl.rt.reset_device(0)\nacl.finalize()\n"
                      "print('done')\n", tmp_path, NPUEMU_TRACE=path)
    assert done.returncode == 0 and done.stdout == "done\n", done.stdout + done.stderr
    assert done.stderr.splitlines() == ["npuemu: trace: cannot write %s: No such file or directory" % path]
    assert sorted(os.listdir(str(tmp_path))) == ["program.py"]


def test_a_relative_path_from_a_deleted_current_directory_is_one_message_and_the_program_ends_as_it_would(tmp_path):
    """NPUEMU_TRACE=trace.json in a directory deleted before the program started: `import acl` raised
    FileNotFoundError (os.getcwd). Now the program runs, and at its exit the usual note says that the
    path cannot be written; it is not written elsewhere either (the program went to another directory)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    program = tmp_path / "program.py"
    program.write_text("import os\nimport acl\nacl.init()\nacl.rt.set_device(0)\nacl.rt.reset_device(0)\n"
                       "acl.finalize()\nos.chdir(%r)\nprint('done')\n" % str(tmp_path))
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}
    done = subprocess.run(["bash", "-c", 'cd "$1" && rmdir "$1" && exec "$2" "$3"', "bash", str(gone),
                           sys.executable, str(program)], capture_output=True, text=True, timeout=60,
                          env={**environment, "NPUEMU_TRACE": "trace.json"})
    assert done.returncode == 0 and done.stdout == "done\n", done.stdout + done.stderr
    assert done.stderr.splitlines() == ["npuemu: trace: cannot write trace.json: a relative path, and the current "
                                        "directory was deleted when tracing started"], done.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["program.py"]


def traces_attached() -> list:
    return [o for o in hooks.CALLS + hooks.TASKS + hooks.REPORTS + hooks.MESSAGES if isinstance(o, trace.Trace)]


def test_configure_starts_switches_and_stops_the_trace_writing_each_one(tmp_path):
    assert not traces_attached()  # off: nothing is attached, nothing is paid
    first, second = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    import acl
    emulator.configure(trace=first)
    assert len(traces_attached()) == 4  # calls, tasks, reports, messages: one trace
    assert acl.rt.set_device(0) == 0
    assert acl.rt.reset_device(0) == 0
    emulator.configure(trace=first, threads=1)  # the same path: the same trace goes on
    assert not os.path.exists(first)
    emulator.configure(trace=second)  # another path: the first one is written
    assert [e["name"] for e in Trace(first).events if e["ph"] == "X"] == ["aclrtSetDevice", "aclrtResetDevice"]
    assert acl.rt.get_device_count()[1] == 0
    emulator.configure(trace="")  # off: the second one is written, nothing stays attached
    assert [e["name"] for e in Trace(second).events if e["ph"] == "X"] == ["aclrtGetDeviceCount"]
    assert not traces_attached()
    assert acl.rt.get_device_count()[1] == 0
    assert [e["name"] for e in Trace(second).events if e["ph"] == "X"] == ["aclrtGetDeviceCount"]


def test_collection_stops_at_the_limit_and_says_so(tmp_path, monkeypatch):
    import acl
    monkeypatch.setattr(trace, "LIMIT", 10)
    path = str(tmp_path / "limited.json")
    emulator.configure(trace=path)
    for _ in range(25):
        acl.rt.get_device_count()
    emulator.configure(trace="")
    found = Trace(path)
    calls = [e for e in found.events if e["ph"] == "X"]
    assert len(calls) == 10
    other = found.data["otherData"]
    assert other["event_limit"] == 10 and other["dropped_events"] == 15 and other["events"] == 11
    mark = [e for e in found.instants if e["cat"] == "npuemu"]
    assert len(mark) == 1 and "limit" in mark[0]["name"] and mark[0]["ts"] >= calls[-1]["ts"]


def test_integers_are_shown_as_given_and_only_pointers_and_handles_in_hex(tmp_path):
    """A device id, a size, a fill value are no addresses: 70000 and 1048576 were shown as 0x11170 and
    0x100000, as every integer from 0x10000 up was."""
    import acl
    path = str(tmp_path / "arguments.json")
    emulator.configure(trace=path)
    assert acl.rt.set_device(70000) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    address, _ = acl.rt.malloc(1 << 20, 0)
    assert acl.rt.memset_async(address, 1 << 20, 70000, 1 << 20, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and acl.rt.destroy_stream(stream) == 0
    assert acl.rt.free(address) == 0 and acl.rt.reset_device(0) == 0
    emulator.configure(trace="")
    shown = [(e["name"], e["args"]["arguments"]) for e in Trace(path).events if e.get("cat") == "api"]
    assert shown[:2] == [("aclrtSetDevice", "70000"), ("aclrtSetDevice", "0")]
    assert ("aclrtMalloc", "1048576, 0") in shown
    assert ("aclrtMemsetAsync", "0x%x, 1048576, 70000, 1048576, 0x%x" % (address, stream)) in shown, shown
    assert ("aclrtFree", "0x%x" % address) in shown


def test_at_the_limit_a_flow_is_kept_whole_or_not_at_all(tmp_path, monkeypatch):
    """The first wait on a record put the flow's start in the place kept after the record's slice, then
    its own slice and the flow's end were dropped at the limit: a start without its end."""
    import acl
    for limit in range(6, 30):
        monkeypatch.setattr(trace, "LIMIT", limit)
        path = str(tmp_path / ("limit-%d.json" % limit))
        emulator.configure(trace=path)
        assert acl.rt.set_device(0) == 0
        first, _ = acl.rt.create_stream()
        second, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        for _ in range(2):
            assert acl.rt.record_event(event, first) == 0
            assert acl.rt.stream_wait_event(second, event) == 0
            assert acl.rt.stream_wait_event(first, event) == 0
            assert acl.rt.synchronize_device() == 0
        for stream in (first, second):
            assert acl.rt.destroy_stream(stream) == 0
        assert acl.rt.destroy_event(event) == 0 and acl.rt.reset_device(0) == 0
        emulator.configure(trace="")
        found = Trace(path)
        found.check_well_formed()
        assert found.data["otherData"]["dropped_events"] > 0, limit


@pytest.mark.parametrize("ns", [0, 1, 999, 1000, 1001, 123456789, 987654321987, 10 ** 15 + 7])
def test_times_read_back_as_the_same_nanosecond_whether_a_reader_truncates_or_rounds(ns):
    us = json.loads(json.dumps(trace._us(ns)))
    assert int(us * 1000) == ns and round(us * 1000) == ns


def test_a_slice_ends_where_the_next_one_begins_in_the_files_numbers_too():
    """ts and dur were each written 0.4 ns late: a slice ended 0.8 ns late, past the start of the next
    one on its stream (0.4 ns late), in the file's own microseconds."""
    generator = random.Random(7)
    for _ in range(5000):
        begin = generator.choice([0, generator.randrange(1, 10 ** 12)])
        end = begin + generator.choice([0, 1, generator.randrange(10 ** 7)])
        ts, dur = json.loads(json.dumps(trace._span(begin, end)))
        next_ts = json.loads(json.dumps(trace._us(end)))  # the next slice, which begins where this one ends
        assert ts + dur <= next_ts, (begin, end, ts, dur, next_ts)
        assert (int(ts * 1000), round(ts * 1000), round((ts + dur) * 1000)) == (begin, begin, end), (begin, end)


def test_the_leak_report_at_exit_is_in_the_trace_and_the_sanitizer_exit_code_still_applies(tmp_path):
    path = str(tmp_path / "leak.json")
    done = run_python("import acl\nacl.init()\nacl.rt.set_device(0)\nacl.rt.malloc(64, 0)\n", tmp_path,
                      NPUEMU_TRACE=path, NPUEMU_SANITIZE_EXITCODE="3")
    assert done.returncode == 3, done.stdout + done.stderr
    leaks = [e for e in Trace(path).instants if e["cat"] == "sanitizer"]
    assert [(e["name"], e["args"]["tool"]) for e in leaks] == [("leakcheck: leak", "leakcheck")]
    assert "program.py:4" in leaks[0]["args"]["message"]
    assert leaks[0]["args"]["sites"] == ["made at %s:4 in <module>" % (tmp_path / "program.py")], leaks[0]
    assert re.fullmatch(r"device memory 0x[0-9a-f]+ \(64 bytes\) on device 0", *leaks[0]["args"]["resources"])


def test_percent_p_in_the_path_is_the_process_id(tmp_path):
    import acl
    emulator.configure(trace=str(tmp_path / "trace-%p.json"))
    acl.rt.get_device_count()
    emulator.configure(trace="")
    assert os.listdir(str(tmp_path)) == ["trace-%d.json" % os.getpid()]


def test_two_writers_of_one_path_at_once_leave_the_last_ones_trace_whole(tmp_path, monkeypatch, capsys):
    """Two processes tracing to one path in different PID namespaces (containers sharing a volume, both
    pid 1) named the same temporary file FILE.<pid>.tmp, truncated and wrote it both, and left a file that
    is not JSON. Here two traces of one process (so one pid) write one path, the second while the first
    is half written: each has a temporary file of its own, the file is the last one's, whole, with the
    mode a new file gets (0o666 less the umask), and nothing else is left beside it."""
    path = str(tmp_path / "trace.json")
    first, second = trace.Trace(path, path, soc="Ascend910B"), trace.Trace(path, path, soc="Ascend310P3")
    whole_writing = trace.Trace._write_to

    def interrupted_by_the_second(self, file):
        file.write('{"traceEvents": [\n')
        file.flush()
        second.write()  # the other writer, from start to end, while this one is half written
        file.seek(0)
        whole_writing(self, file)

    monkeypatch.setattr(first, "_write_to", interrupted_by_the_second.__get__(first))
    first.write()
    assert capsys.readouterr().err == ""
    assert Trace(path).data["otherData"]["soc"] == "Ascend910B"
    assert os.listdir(str(tmp_path)) == ["trace.json"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_a_process_that_never_used_npuemu_writes_no_trace_nor_anything_else_at_exit(tmp_path):
    """pytest imports emulator to load its plugin: with NPUEMU_TRACE set for the program a test runs, its
    exit wrote an empty trace over the program's. (Nor is any setting read at exit: no plog line.)"""
    path = tmp_path / "trace.json"
    path.write_text("the program's trace\n")
    logs = tmp_path / "logs"
    done = run_python("import acl\nimport emulator\nimport emulator.pytest_plugin\n", tmp_path, NPUEMU_TRACE=str(path),
                      NPUEMU_SANITIZE_EXITCODE="9", ASCEND_GLOBAL_LOG_LEVEL="0", ASCEND_PROCESS_LOG_PATH=str(logs))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert path.read_text() == "the program's trace\n" and not logs.exists()


FORKING_PROGRAM = """
import os
import sys
import acl
acl.init()
acl.rt.set_device(0)
child = os.fork()
if child == 0:
    if sys.argv[1] == "calls":
        acl.rt.get_device()
    sys.exit(0)  # exit functions run
os.waitpid(child, 0)
acl.rt.reset_device(0)
acl.finalize()
print(os.getpid(), child)
"""


@pytest.mark.parametrize("child_calls", [True, False])
def test_a_forked_child_writes_its_own_trace_and_only_if_it_used_npuemu(child_calls, tmp_path):
    """The child's exit wrote the parent's events to the parent's tr-<parent pid>.json (which the parent
    overwrote later); now the child's trace holds its own calls, in its own file."""
    program = tmp_path / "program.py"
    program.write_text(FORKING_PROGRAM)
    done = subprocess.run([sys.executable, str(program), "calls" if child_calls else "nothing"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NPUEMU_TRACE": str(tmp_path / "tr-%p.json")})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    parent, child = (int(word) for word in done.stdout.split())
    files = sorted(name for name in os.listdir(str(tmp_path)) if name.startswith("tr-"))
    assert files == sorted(["tr-%d.json" % parent] + (["tr-%d.json" % child] if child_calls else []))
    assert calls_in(tmp_path / ("tr-%d.json" % parent)) == ["aclInit", "aclrtSetDevice", "aclrtResetDevice",
                                                             "aclFinalize"]
    if child_calls:
        assert calls_in(tmp_path / ("tr-%d.json" % child)) == ["aclrtGetDevice"]


def calls_in(path) -> list:
    return [event["name"] for event in Trace(str(path)).events if event.get("cat") == "api"]
