# bin/setenv.bash: the same environment as set_env.sh one directory up (some recipes source this one).
source "$(CDPATH= cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." >/dev/null && pwd)/set_env.sh"
