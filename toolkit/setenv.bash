# bin/setenv.bash: the same environment as set_env.sh one directory up (some recipes source this one).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/set_env.sh"
