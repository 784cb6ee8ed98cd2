#!/usr/bin/env bash
# Puts the Python interpreters of the tox matrix on PATH.
#
#   source .ci/pythons.sh        (bash; then run tox)
#   .ci/pythons.sh CMD...        run CMD with them on PATH (`make tox` does this)
#
# The versions come from tox.ini's env_list (py311-..., py312-..., py313-...), so
# the matrix is their one home. An interpreter already on PATH is used as it is;
# otherwise it is looked up in pyenv (`pyenv prefix X.Y`, or the newest
# $PYENV_ROOT/versions/X.Y.*, for a machine without the pyenv command on PATH).
# A version found nowhere fails here, with its name, instead of tox reporting
# the environment as skipped or a bare "could not find python". Only the
# pythonX.Y names go on PATH (links in build/pythons/, or $EID_PYTHONS_DIR),
# not the rest of an interpreter's bin directory (its python3, pip ...).
set -uo pipefail

_eid_pythons_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

_eid_pythons_find() {  # _eid_pythons_find 3.13 -> directory holding python3.13
    local version=$1 candidate prefix
    candidate=$(command -v "python$version" 2>/dev/null) &&
        "$candidate" -c 'import sys' 2>/dev/null && { dirname "$candidate"; return 0; }
    if command -v pyenv >/dev/null; then
        # pyenv prefix wants a full version: take the newest installed X.Y.*.
        for prefix in $(pyenv versions --bare 2>/dev/null | grep -E "^${version//./\\.}(\.[0-9]+)?$" | sort -rV); do
            prefix=$(pyenv prefix "$prefix" 2>/dev/null) || continue
            [[ -x $prefix/bin/python$version ]] && { echo "$prefix/bin"; return 0; }
        done
    fi
    for prefix in $(printf '%s\n' "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".* | sort -rV); do
        [[ -x $prefix/bin/python$version ]] && { echo "$prefix/bin"; return 0; }
    done
    return 1
}

_eid_pythons_setup() {
    local versions version dir missing=()
    versions=$(sed -nE '/^env_list *=/{s/^env_list *= *//;p}' "$_eid_pythons_root/tox.ini" |
        grep -oE 'py3[0-9]+' | sort -u | sed -E 's/^py3/3./')
    if [[ -z $versions ]]; then
        echo "pythons: no pyXY environments in tox.ini's env_list" >&2
        return 1
    fi
    local links=${EID_PYTHONS_DIR:-$_eid_pythons_root/build/pythons}
    mkdir -p "$links" || return 1
    for version in $versions; do
        if dir=$(_eid_pythons_find "$version"); then
            ln -sfn "$dir/python$version" "$links/python$version" || return 1
            echo "pythons: Python $version: $dir/python$version" >&2
        else
            rm -f "$links/python$version"
            missing+=("$version")
        fi
    done
    case ":$PATH:" in *":$links:"*) ;; *) PATH="$links:$PATH" ;; esac
    export PATH
    if ((${#missing[@]})); then
        echo "pythons: ERROR: Python ${missing[*]} not found (the tox matrix needs" \
            "$(echo $versions)): not on PATH, not in pyenv (${PYENV_ROOT:-$HOME/.pyenv}/versions)." \
            "Install it, e.g. 'pyenv install ${missing[0]}'." >&2
        return 1
    fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    _eid_pythons_setup || exit 1
    (($#)) || { echo "usage: $0 COMMAND... (or: source $0)" >&2; exit 2; }
    exec "$@"
else
    _eid_pythons_setup
fi
