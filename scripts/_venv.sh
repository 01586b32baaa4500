# Shared by scripts/demo and scripts/test: make .venv with Python 3.11+ and install the project.
# Usage: source scripts/_venv.sh; ensure_venv "" | ensure_venv ".[dev]"
set -euo pipefail

find_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "govern needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

ensure_venv() {
  local target="${1:-.}"
  local py
  if [ ! -x .venv/bin/python ]; then
    py=$(find_python)
    "$py" -m venv .venv
  fi
  local stamp=".venv/.installed-$(echo "$target" | tr -c 'a-z' '_')"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$target"
    touch "$stamp"
  fi
}
