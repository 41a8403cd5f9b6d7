# Sourced by scripts and tests: python_with MODULE... prints the first of $PTDP_PYTHON, python3 and
# /usr/bin/python3 (Debian's, with its python3-* packages) that imports every MODULE, or returns 1
# and prints nothing when none does.
python_with() {
  local code p
  code="import $(IFS=,; echo "$*")"
  for p in "${PTDP_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c "$code" >/dev/null 2>&1 && { echo "$p"; return 0; }
  done
  return 1
}
