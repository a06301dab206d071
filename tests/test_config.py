"""The NPUEMU_* settings: every one read without regard to case, and every unusable value refused
with a message that names the variable."""
import pytest

import emulator
from emulator import config
from emulator.config import ConfigError, from_environment


@pytest.fixture
def env(monkeypatch):
    for name in ("NPUEMU_SOC", "NPUEMU_DEVICE_COUNT", "NPUEMU_DEVICE_MEMORY", "NPUEMU_THREADS",
                 "NPUEMU_EXECUTION", "NPUEMU_LEAK_CHECK", "NPUEMU_VECTOR_ISA", "NPUEMU_TASK_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("spelling,family,reported", [
    ("ascend910b", "Ascend910B", "Ascend910B3"), ("ASCEND910B2", "Ascend910B", "Ascend910B2"),
    ("ascend910_93", "Ascend910_93", "Ascend910_9391"), ("ascend310p3", "Ascend310P", "Ascend310P3"),
    ("ascend910proa", "Ascend910", "Ascend910ProA"), ("ascend950pr", "Ascend950", "Ascend950PR"),
])
def test_the_soc_name_is_read_without_regard_to_case(env, spelling, family, reported):
    env.setenv("NPUEMU_SOC", spelling)
    settings = from_environment()
    assert (settings.profile.family, settings.soc_name) == (family, reported)


@pytest.mark.parametrize("spelling,reported", [
    ("Ascend950DT", "Ascend950DT"), ("ascend950pr", "Ascend950PR"), ("Ascend910_95", "Ascend910_95"),
    ("ascend910b4", "Ascend910B4"), ("ascend910b2c", "Ascend910B2C"), ("Ascend910B4-1", "Ascend910B4-1"), ("Ascend910_9362", "Ascend910_9362"), ("Ascend310P1", "Ascend310P1"),
])
def test_a_specific_name_of_its_family_s_shape_is_reported_as_given(env, spelling, reported):
    env.setenv("NPUEMU_SOC", spelling)
    assert from_environment().soc_name == reported


@pytest.mark.parametrize("value", ["Ascend950zz", "Ascend950 ", "Ascend950,Ascend910B", "Ascend950PR2",
                                   "Ascend910B99", "Ascend910B\n", "Ascend910_9291", "Ascend910_93911",
                                   "Ascend310P12", "Ascend910_95x", "Ascend910Bx", "Ascend910B3C"])
def test_a_soc_name_is_a_family_or_a_specific_name_of_its_shape_and_nothing_more(env, value):
    """The Ascend950 pattern had no end: aclrtGetSocName reported "Ascend950zz"; and any number of digits
    made a specific name."""
    env.setenv("NPUEMU_SOC", value)
    with pytest.raises(ConfigError) as error:
        from_environment()
    assert str(error.value) == (
        "NPUEMU_SOC: unknown SoC %r: expected one of Ascend910, Ascend910B, Ascend910_93, Ascend950, Ascend310P, or "
        "a specific name: Ascend910A, Ascend910ProA, Ascend910ProB, Ascend910PremiumA, Ascend910B<digit>, Ascend910B2C, "
        "Ascend910B4-1, Ascend910_93<two digits>, Ascend950PR, Ascend950DT, Ascend910_95, Ascend310P<digit>" % value)


@pytest.mark.parametrize("value,expected", [("1", True), ("ON", True), ("yes", True), ("True", True),
                                            ("0", False), ("off", False), ("NO", False), ("false", False)])
def test_leak_check_takes_the_usual_spellings_of_a_switch(env, value, expected):
    env.setenv("NPUEMU_LEAK_CHECK", value)
    assert from_environment().leak_check is expected


@pytest.mark.parametrize("variable,value", [
    ("NPUEMU_LEAK_CHECK", "maybe"), ("NPUEMU_DEVICE_MEMORY", "lots"), ("NPUEMU_DEVICE_MEMORY", "16Q"),
    ("NPUEMU_TASK_TIMEOUT", "soon"), ("NPUEMU_TASK_TIMEOUT", "-1"), ("NPUEMU_TASK_TIMEOUT", "inf"),
    ("NPUEMU_SOC", "Ascend9000"), ("NPUEMU_EXECUTION", "lazy"), ("NPUEMU_THREADS", "two"),
    ("NPUEMU_DEVICE_COUNT", "0"), ("NPUEMU_VECTOR_ISA", "sse9"), ("NPUEMU_DEVICE_MEMORY", "1000T"),
    ("NPUEMU_THREADS", "1025"), ("NPUEMU_THREADS", "2147483648"),
])
def test_an_unusable_value_is_refused_naming_the_variable(env, variable, value):
    env.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        from_environment()
    assert str(error.value).startswith(variable + ":")
    assert repr(value) in str(error.value) or value in str(error.value)


def test_the_task_timeout_is_in_seconds_and_zero_means_no_limit(env):
    assert from_environment().task_timeout == config.DEFAULT_TASK_TIMEOUT
    env.setenv("NPUEMU_TASK_TIMEOUT", "0.25")
    assert from_environment().task_timeout == 0.25
    env.setenv("NPUEMU_TASK_TIMEOUT", "0")
    assert from_environment().task_timeout == 0.0


def test_configure_names_the_keyword_of_a_bad_size():
    with pytest.raises(ConfigError, match="^device_memory: expected bytes"):
        config.with_changes(from_environment(), device_memory="lots")


@pytest.mark.parametrize("setting,value,expected", [
    ("sanitize_exitcode", "5", "NPUEMU_SANITIZE_EXITCODE: expected int or None, found '5'"),
    ("sanitize", 3, "NPUEMU_SANITIZE: expected str, found 3"),
    ("trace", 5, "NPUEMU_TRACE: expected str, found 5"),
    ("faults", 7, "NPUEMU_FAULTS: expected str, found 7"),
    ("task_timeout", "x", "NPUEMU_TASK_TIMEOUT: expected float or int, found 'x'"),
    ("threads", True, "NPUEMU_THREADS: expected int, found True"),
    ("leak_check", 1, "NPUEMU_LEAK_CHECK: expected bool, found 1"),
    ("soc", 5, "NPUEMU_SOC: expected str, found 5"),
    ("soc", None, "NPUEMU_SOC: expected str, found None"),
])
def test_configure_rejects_a_value_of_the_wrong_type_naming_the_setting(setting, value, expected):
    before = emulator.settings()
    with pytest.raises(emulator.ConfigError) as raised:
        emulator.configure(**{setting: value})
    assert str(raised.value) == expected
    assert emulator.settings() == before


def test_device_memory_the_host_cannot_reserve_is_the_invalid_parameter_status_naming_the_variable(tmp_path):
    """Within the 64T bound a host can still refuse the reservation (here a 4 GiB address-space limit
    against 8 x 64 GiB): the call that needs it gets 100000, not the internal error of a MemoryError."""
    import subprocess
    import sys
    program = "\n".join(["import resource", "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))",
                          "import acl", "print(acl.rt.set_device(0), acl.get_recent_err_msg())"])
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "NPUEMU_DEVICE_MEMORY": "64G", "NPUEMU_DEVICE_COUNT": "8"})
    assert result.stdout.startswith("100000 "), result.stdout + result.stderr
    assert "NPUEMU_DEVICE_MEMORY: expected a size this host can reserve" in result.stdout, result.stdout


def test_from_sources_changes_replace_their_variables_and_only_the_result_is_validated(env):
    """What the pytest plugin's marker and options, and `npuemu run`'s options, make of the environment."""
    env.setenv("NPUEMU_SOC", "bogus")
    env.setenv("NPUEMU_DEVICE_MEMORY", "1G")
    settings = config.from_sources({"soc": "Ascend310P"})  # the bad variable is not read
    assert (settings.soc_name, settings.device_memory) == ("Ascend310P3", 1 << 30)  # nor the memory lost
    assert config.from_sources({"soc": "Ascend310P", "device_memory": "2G"}).device_memory == 2 << 30
    with pytest.raises(ConfigError, match="^NPUEMU_SOC: unknown SoC 'bogus'"):
        config.from_sources({"device_count": 2})
    env.delenv("NPUEMU_SOC")
    env.delenv("NPUEMU_DEVICE_MEMORY")
    settings = config.from_sources({"soc": "Ascend310P"})
    assert settings.device_memory == settings.profile.memory_bytes  # no memory chosen: the chip's
    env.setenv("NPUEMU_DEVICE_MEMORY", "16T")  # too much for the 8 devices of the default, fine for 2
    assert config.from_sources({"device_count": 2}).device_count == 2
