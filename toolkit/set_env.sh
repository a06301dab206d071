# npuemu's environment for its CANN-shaped toolkit, as the card's toolkit's set_env.sh sets it up:
#     source <toolkit root>/set_env.sh
# The root is the directory of this file. ASCEND_CUSTOM_PATH, which the documentation's CMakeLists.txt
# reads and the card's script leaves to the user, is set too. Safe under `set -eu`; prepends nothing twice.
#
# bash and zsh say which file they are sourcing; a POSIX shell such as dash does not, so there the root
# must be given (NPUEMU_TOOLKIT_ROOT=<root> . <root>/set_env.sh), and without it the script stops with a
# message rather than take the current directory for the root. The shell-specific forms are in eval so
# that other shells never parse them.
if [ -n "${BASH_VERSION:-}" ]; then
    eval '_npuemu_file="${BASH_SOURCE[0]:-$0}"'
elif [ -n "${ZSH_VERSION:-}" ]; then
    eval '_npuemu_file="${(%):-%x}"'
elif [ -n "${NPUEMU_TOOLKIT_ROOT:-}" ]; then
    _npuemu_file="$NPUEMU_TOOLKIT_ROOT/set_env.sh"
else
    echo "npuemu: set_env.sh: this shell does not tell which file it sources: source it from bash or zsh, or give" \
         "the root: NPUEMU_TOOLKIT_ROOT=<root> . <root>/set_env.sh (the root: npuemu toolkit path)" >&2
    return 1 2>/dev/null || exit 1
fi
_npuemu_root="$(CDPATH= cd -- "$(dirname -- "$_npuemu_file")" >/dev/null && pwd)"  # CDPATH would print, or go elsewhere
unset _npuemu_file

_npuemu_prepend() {  # _npuemu_prepend VARIABLE DIRECTORY...: in front, once, with no empty entry
    local variable="$1" value entry
    shift
    value="$(eval "printf '%s' \"\${$variable:-}\"")"
    for entry in "$@"; do
        case ":$value:" in
            *":$entry:"*) ;;
            *) value="$entry${value:+:$value}" ;;
        esac
    done
    export "$variable=$value"
}

export ASCEND_CUSTOM_PATH="$_npuemu_root"
export ASCEND_HOME_PATH="$_npuemu_root"
export ASCEND_TOOLKIT_HOME="$_npuemu_root"
export ASCEND_AICPU_PATH="$_npuemu_root"
export ASCEND_OPP_PATH="$_npuemu_root/opp"
export TOOLCHAIN_HOME="$_npuemu_root/toolkit"
_npuemu_prepend LD_LIBRARY_PATH "$_npuemu_root/lib64/plugin/nnengine" "$_npuemu_root/lib64/plugin/opskernel" "$_npuemu_root/lib64"
_npuemu_prepend PATH "$_npuemu_root/bin"
_npuemu_prepend PYTHONPATH "$_npuemu_root/opp/built-in/op_impl/ai_core/tbe" "$_npuemu_root/python/site-packages"
_npuemu_prepend CMAKE_PREFIX_PATH "$_npuemu_root/lib64/cmake"
unset -f _npuemu_prepend
unset _npuemu_root
