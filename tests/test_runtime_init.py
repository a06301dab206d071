"""aclInit / aclFinalize / aclFinalizeReference (docs/runtime.md, "Initialisation"): reference counting, repeat
codes, re-initialisation, and the JSON configuration file (missing, invalid, different on a second
call, `defaultDevice`). Facts that only a fresh process shows are checked in a subprocess."""
import json
import os
import subprocess
import sys

import pytest

import acl
from support import assert_rejected, last_error, run_program


def device_is_set() -> bool:
    return acl.rt.get_device()[1] == 0


def test_repeated_init_is_harmless_and_counted_by_finalize_reference():
    assert acl.init() == 0
    assert_rejected(acl.init(), acl.ACL_ERROR_REPEAT_INITIALIZE, "aclInit", "reference count is now 2")
    assert_rejected(acl.init(""), acl.ACL_ERROR_REPEAT_INITIALIZE, "reference count is now 3")
    assert acl.rt.set_device(0) == 0
    assert acl.finalize_reference() == (2, 0)
    assert acl.finalize_reference() == (1, 0)
    assert device_is_set(), "finalize_reference tore down before the count reached zero"
    assert acl.finalize_reference() == (0, 0)
    assert not device_is_set(), "the last finalize_reference must release the devices"
    count, ret = acl.finalize_reference()
    assert (count, ret) == (0, acl.ACL_ERROR_REPEAT_FINALIZE)
    assert "reference count 0" in last_error()
    assert_rejected(acl.finalize(), acl.ACL_ERROR_REPEAT_FINALIZE, "aclFinalize")


def test_finalize_tears_down_whatever_the_count_and_twice_is_reported():
    assert acl.init() == 0
    acl.init()
    acl.get_recent_err_msg()
    assert acl.rt.set_device(1) == 0
    assert acl.finalize() == 0
    assert not device_is_set()
    assert_rejected(acl.finalize(), acl.ACL_ERROR_REPEAT_FINALIZE, "aclFinalize", "repeated")


def test_reinit_after_finalize_is_a_full_init():
    assert acl.init() == 0
    assert acl.finalize() == 0
    assert acl.init() == 0, last_error()
    assert acl.rt.set_device(0) == 0
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_config_file_accepted_and_same_content_repeats_with_100002(tmp_path):
    path = write(tmp_path, "acl.json", "{}")
    same = write(tmp_path, "same.json", "{}")
    assert acl.init(path) == 0, last_error()
    assert_rejected(acl.init(same), acl.ACL_ERROR_REPEAT_INITIALIZE)


def test_missing_config_file_is_100003_and_leaves_the_runtime_uninitialised(tmp_path):
    missing = str(tmp_path / "nowhere.json")
    assert_rejected(acl.init(missing), acl.ACL_ERROR_INVALID_FILE, "configPath", "nowhere.json")
    assert acl.init() == 0, "a failed aclInit must not count as an initialisation"


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\"text\""])
def test_config_file_that_is_no_json_object_is_100006(tmp_path, text):
    path = write(tmp_path, "bad.json", text)
    assert_rejected(acl.init(path), acl.ACL_ERROR_PARSE_FILE, "configPath", "bad.json")
    assert acl.init() == 0


def test_second_init_with_different_content_is_100000(tmp_path):
    assert acl.init(write(tmp_path, "a.json", "{}")) == 0
    other = write(tmp_path, "b.json", json.dumps({"dump": {"dump_path": "/tmp"}}))
    assert_rejected(acl.init(other), acl.ACL_ERROR_INVALID_PARAM, "configPath", "different")
    assert acl.finalize_reference() == (0, 0), "a rejected second aclInit must not add a reference"


def test_default_device_in_config_sets_the_device_implicitly(tmp_path):
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {"default_device": "2"}}))
    assert acl.init(path) == 0, last_error()
    address, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)   # no aclrtSetDevice
    assert ret == 0, last_error()
    assert acl.rt.get_device() == (2, 0)
    assert acl.rt.free(address) == 0
    assert acl.finalize() == 0
    assert acl.init() == 0
    assert acl.rt.get_device()[1] == acl.ACL_ERROR_RT_CONTEXT_NULL, "defaultDevice outlived its aclInit"


@pytest.mark.parametrize("value", ["99", "minus one"])
def test_bad_default_device_rejects_init_without_initialising(tmp_path, value):
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {"default_device": value}}))
    ret = acl.init(path)
    assert ret in (acl.ACL_ERROR_RT_INVALID_DEVICEID, acl.ACL_ERROR_INVALID_PARAM)
    assert "default" in last_error().lower()
    assert acl.init() == 0, "a rejected aclInit left the runtime initialised"


FRESH_PROCESS = r"""
import json, acl, aclnn_api
facts = {
    "finalize_without_init": acl.finalize(),
    "finalize_again": acl.finalize(),
    "init": acl.init(),
    "count": acl.rt.get_device_count(),
    "soc": acl.get_soc_name(),
    "family": aclnn_api.operator.soc().family,
}
acl.finalize()
print(json.dumps(facts))
"""


def test_fresh_process_finalize_once_without_init_and_environment_settings(tmp_path):
    """In a new process aclFinalize without aclInit succeeds once (the flag starts false); the device
    count and the chip come from NPUEMU_DEVICE_COUNT and NPUEMU_SOC."""
    done, _ = run_program(FRESH_PROCESS, tmp_path, {"NPUEMU_DEVICE_COUNT": "3", "NPUEMU_SOC": "Ascend910B2"})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts == {"finalize_without_init": 0, "finalize_again": acl.ACL_ERROR_REPEAT_FINALIZE, "init": 0,
                     "count": [3, 0], "soc": "Ascend910B2", "family": "Ascend910B"}
    assert done.stderr == ""


BAD_ENVIRONMENT = """
import json
import os
import subprocess
import sys
import acl
import aclnn_api as nn
runtime = acl.rt.set_device(0), acl.get_recent_err_msg()
t = nn.aclCreateTensor([2], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, [2], 0x1000)
operator = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t)[2], acl.get_recent_err_msg()
nn.aclDestroyTensor(t)
print(json.dumps({"runtime": runtime, "operator": operator}))
"""


def test_a_bad_environment_setting_is_the_first_calls_status_and_message(tmp_path):
    """The settings are read when first needed: an unusable NPUEMU_* value is the invalid-parameter
    status of the layer (100000 for the runtime, 161002 for aclnn) with a message that names the
    variable, the value and what it accepts; importing still works."""
    done, _ = run_program(BAD_ENVIRONMENT, tmp_path, {"NPUEMU_SOC": "Ascend123"})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    for (code, message), expected in ((facts["runtime"], acl.ACL_ERROR_INVALID_PARAM), (facts["operator"], 161002)):
        assert code == expected
        assert "NPUEMU_SOC" in message and "Ascend123" in message and "Ascend910B" in message


def test_the_cli_reports_a_bad_environment_setting_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_THREADS": "0"}, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "npuemu: NPUEMU_THREADS: expected a positive count, found 0\n"


@pytest.mark.parametrize("threads", ["1025", "2147483648"])
def test_more_threads_than_the_kernels_take_are_refused_by_the_first_call_and_the_cli(tmp_path, threads):
    """NPUEMU_THREADS=2**31 passed validation, then the kernels' set_threads (a C int) raised TypeError:
    507000 from every kernel and a traceback from `npuemu`. Now the bound is checked with the others."""
    expected = "NPUEMU_THREADS: expected at most 1024 threads, found %s" % threads
    done, _ = run_program(BAD_ENVIRONMENT, tmp_path, {"NPUEMU_THREADS": threads})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    for (code, message), status in ((facts["runtime"], acl.ACL_ERROR_INVALID_PARAM), (facts["operator"], 161002)):
        assert code == status and expected in message, (code, message)
    done = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_THREADS": threads}, timeout=60)
    assert (done.returncode, done.stderr) == (2, "npuemu: %s\n" % expected)


def test_the_cli_reports_the_kernels_with_the_settings_in_force(tmp_path):
    done = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_THREADS": "3", "NPUEMU_VECTOR_ISA": "avx2"}, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    assert lines["threads"] == "3" and lines["vector_isa"] == "avx2"
    assert "3 thread(s)" in lines["kernels"]
    assert "vector ISA avx2" in lines["kernels"] or "vector ISA baseline" in lines["kernels"]


@pytest.mark.parametrize("content", [b"\xff\xfe{\x00}\x00", b'{"a": "\xe9t\xe9"}', b"\x89PNG\r\n\x1a\n"])
def test_config_file_that_is_not_utf8_is_100006_like_bad_json(tmp_path, content):
    """It returned 507000 (an internal error) before."""
    path = tmp_path / "latin1.json"
    path.write_bytes(content)
    assert_rejected(acl.init(str(path)), acl.ACL_ERROR_PARSE_FILE, "configPath", "latin1.json")
    assert acl.init() == 0, "nothing was committed by the rejected call"


def test_repeated_init_and_finalize_messages_do_not_repeat_the_call_name():
    assert acl.init() == 0
    assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert "aclInit: aclInit" not in last_error()
    assert acl.finalize() == 0
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE
    assert "aclFinalize: aclFinalize" not in last_error()


# ------------------------------------------------------------------------------------------------
# files that are no regular file, files too large, content and paths no parser takes


def test_a_fifo_as_config_file_is_100003_at_once_naming_it_and_holds_no_lock(tmp_path):
    """A FIFO with no writer blocked aclInit for ever (and every other thread behind the runtime's lock);
    now nothing that is not a regular file is read: 100003 at once, the message saying what it is."""
    fifo = str(tmp_path / "acl.json")
    os.mkfifo(fifo)
    assert_rejected(acl.init(fifo), acl.ACL_ERROR_INVALID_FILE, "configPath", "acl.json", "a FIFO")
    assert acl.init() == 0, "the rejected call initialised the runtime"


def test_a_character_device_or_a_directory_as_config_file_is_100003_naming_what_it_is(tmp_path):
    """/dev/zero was read without bound (gigabytes, then MemoryError: 507000, or the OOM killer)."""
    assert_rejected(acl.init("/dev/zero"), acl.ACL_ERROR_INVALID_FILE, "configPath", "/dev/zero", "a character device")
    assert_rejected(acl.init(str(tmp_path)), acl.ACL_ERROR_INVALID_FILE, "configPath", "a directory")


def test_a_config_file_over_the_size_bound_is_100005_and_one_at_the_bound_is_read(tmp_path):
    from emulator.config_file import MAX_BYTES
    large = tmp_path / "large.json"
    large.write_text("{}" + " " * (MAX_BYTES - 1))
    assert_rejected(acl.init(str(large)), acl.ACL_ERROR_INVALID_FILE_SIZE, "configPath", "large.json",
                    "at most %d bytes" % MAX_BYTES, "%d bytes" % (MAX_BYTES + 1))
    fits = tmp_path / "fits.json"
    fits.write_text("{}" + " " * (MAX_BYTES - 2))
    assert acl.init(str(fits)) == 0, last_error()


@pytest.mark.parametrize("content,words", [('[' * 2000 + ']' * 2000, ("nested too deeply",)),
                                           ('{"a": ' + "1" * 5000 + '}', ("digits",)),
                                           ('{"a": NaN}', ("NaN is not a JSON value",)),
                                           ('{"a": [-Infinity]}', ("-Infinity is not a JSON value",))])
def test_config_content_no_parser_takes_is_100006_not_an_internal_error(tmp_path, content, words):
    """JSON nested 2000 deep raised RecursionError: 507000."""
    path = write(tmp_path, "deep.json", content)
    assert_rejected(acl.init(path), acl.ACL_ERROR_PARSE_FILE, "configPath", "deep.json", *words)
    assert acl.init() == 0


@pytest.mark.parametrize("path,words", [("acl.json\x00x", ("null byte",)), ("\ud800.json", ("surrogate",))])
def test_a_config_path_no_file_can_have_is_100000_naming_the_path(tmp_path, path, words):
    """A NUL byte (ValueError) or a lone surrogate (UnicodeEncodeError) in the path gave 507000."""
    assert_rejected(acl.init(str(tmp_path / path)), acl.ACL_ERROR_INVALID_PARAM, "configPath", "file path", *words)
    assert acl.init() == 0


@pytest.mark.parametrize("value", ["true", "1.7", "1e400", '"\\u0661"', '"1_0"', '"+3"', '" 1"', '"1 "', '""', "null",
                                   "[1]", '{"id": 1}'])
def test_default_device_is_a_json_integer_or_a_string_of_ascii_digits_only(tmp_path, value):
    """Python's int() took true as 1, 1.7 as 1, an Arabic-Indic digit, "+3", "1_0" (and 1e400 raised
    OverflowError: 507000); a C parser checking for digits takes none of them."""
    path = tmp_path / "acl.json"
    path.write_text('{"defaultDevice": {"default_device": %s}}' % value)  # the JSON text as written (1e400)
    assert_rejected(acl.init(str(path)), acl.ACL_ERROR_INVALID_PARAM, "defaultDevice.default_device",
                    "a JSON integer or a string of decimal digits")
    assert acl.rt.get_device()[1] == acl.ACL_ERROR_RT_CONTEXT_NULL, "a rejected default device was set"


@pytest.mark.parametrize("value", [-1, 8, 2147483648, "2147483648", "9" * 5000])
def test_a_default_device_id_outside_the_devices_however_long_is_107001(tmp_path, value):
    """Past int32 it was 100000 with a range of int32 (negative ids included) or, for 5000 digits,
    "expected a string of decimal digits, found" one."""
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {"default_device": value}}))
    assert_rejected(acl.init(path), acl.ACL_ERROR_RT_INVALID_DEVICEID, "defaultDevice.default_device",
                    "expected a device id in [0, 8), found")
    assert acl.rt.get_device()[1] == acl.ACL_ERROR_RT_CONTEXT_NULL, "a rejected default device was set"


@pytest.mark.parametrize("section", ["1", 1, None, [1]])
def test_a_default_device_section_that_is_no_object_is_100000(tmp_path, section):
    """It was accepted silently: no device set, and no INFO line either."""
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": section}))
    assert_rejected(acl.init(path), acl.ACL_ERROR_INVALID_PARAM, "defaultDevice: expected a JSON object, found")


def test_a_default_device_section_without_an_id_sets_none(tmp_path):
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {}}))
    assert acl.init(path) == 0, last_error()
    assert acl.rt.get_device()[1] == acl.ACL_ERROR_RT_CONTEXT_NULL


@pytest.mark.parametrize("value", [3, "3", "03"])
def test_default_device_as_integer_or_digit_string_is_taken(tmp_path, value):
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {"default_device": value}}))
    assert acl.init(path) == 0, last_error()
    assert acl.rt.get_device() == (3, 0)


def test_a_default_device_the_device_count_no_longer_has_is_107001_at_the_call_that_uses_it(tmp_path):
    """emulator.configure() may lower the device count after aclInit (no device is set yet): the calls
    that set the default device implicitly raised IndexError, 507000. Now each is 107001 naming the
    setting, and aclrtSetDevice still works."""
    import emulator
    path = write(tmp_path, "acl.json", json.dumps({"defaultDevice": {"default_device": "5"}}))
    assert acl.init(path) == 0, last_error()
    emulator.configure(device_count=2)
    assert_rejected(acl.rt.malloc(64, 0)[1], acl.ACL_ERROR_RT_INVALID_DEVICEID, "defaultDevice.default_device",
                    "[0, 2)", "5")
    assert_rejected(acl.rt.create_stream()[1], acl.ACL_ERROR_RT_INVALID_DEVICEID, "defaultDevice.default_device")
    assert acl.rt.set_device(1) == 0 and acl.rt.get_device() == (1, 0)
