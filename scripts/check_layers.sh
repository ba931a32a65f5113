#!/usr/bin/env bash
# The layering rules that a compiler cannot check (docs/ARCHITECTURE.md), as one test:
#  1. only core/records/run_dir.* spells the names in a run folder (its JSONL files, "policy-v<N>",
#     "step-<S>"; everything else asks RunFolder/RunDirectory);
#  2. ui/ includes no core header outside the facade, core/api/ (its torch wall includes the shared check);
#  3. no function in core/run, core/records or core/serve is longer than 80 lines
#     (scripts/function_lengths.py);
#  4. no tracked source, script, CMake or Markdown file points outside the repository (the design
#     notes and the facts file docs/ replaced, or the shared folder beside the checkout): cite docs/;
#  5. no chart list outside the chart catalogue (core/records/charts.cpp): a chart's title written as a
#     string in the app, the UI, the browser page or another core file means a second list.
#  6. core/records includes no header of a library above it, nor Qt or torch; core/serve includes no
#     training header (core/run, worker, model, grpo, rollout, text) nor torch: they read and serve
#     runs without the trainer (the link walls in CMakeLists.txt check the libraries they link).
#  7. no list of event kinds outside the event catalogue (core/records/catalogue.cpp): two control
#     kinds ("pause" and "resume") named on one line elsewhere means a second list of what is marked.
# Exits non-zero naming every violation. Run from anywhere: scripts/check_layers.sh
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
names=$(grep -rn 'metrics\.jsonl\|samples\.jsonl\|events\.jsonl\|"policy-v\|"step-' core ui app tools --include='*.cpp' --include='*.h' |
        grep -v '^core/records/run_dir\.' | grep -v '//.*\(\.jsonl\|"policy-v\|"step-\)')
if [ -n "$names" ]; then
  echo "run folder names spelled outside core/records/run_dir.* (use RunFolder's names and methods):"
  echo "$names"
  status=1
fi
includes=$(grep -rn '#include "core/' ui --include='*.cpp' --include='*.h' | grep -v '#include "core/api/' |
           grep -v '^ui/torch_wall\.cpp:[0-9]*:#include "core/common/torch_wall\.h"$')
if [ -n "$includes" ]; then
  echo "ui/ includes core headers outside the facade core/api/:"
  echo "$includes"
  status=1
fi
if ! python3 scripts/function_lengths.py --max 80 --top 3 core/run core/records core/serve; then
  echo "a function in core/run, core/records or core/serve is longer than 80 lines (listed above)"
  status=1
fi
# Bracketed so that this file does not match itself.
outside_refs='DESIGN[.]md\|facts[.]md\|facts[ ]§\|[.][.]/shared/'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  outside=$(git ls-files -z -- '*.cpp' '*.h' '*.c' '*.cc' '*.hpp' '*.py' '*.sh' '*.js' '*.mjs' '*.html' \
              '*.css' '*.txt' '*.cmake' '*.in' '*.md' | grep -zv '\(^\|/\)node_modules/' |
            xargs -0 -r grep -sn "$outside_refs")
  if [ -n "$outside" ]; then
    echo "references to files outside the repository (cite docs/ARCHITECTURE.md, formulas.md, formats.md,"
    echo "workers.md or dashboard.md instead; docs/ holds what those notes said):"
    echo "$outside"
    status=1
  fi
else
  echo "not a git checkout: references outside the repository not checked"
fi
titles=$(grep -oE '\{"[a-z_]+", "[^"]+", "' core/records/charts.cpp | sed -E 's/\{"[a-z_]+", "([^"]+)", "/\1/')
if [ "$(echo "$titles" | grep -c .)" -lt 10 ]; then
  echo "core/records/charts.cpp: could not read the chart catalogue's titles (this check needs updating)"
  status=1
fi
lists=$(while IFS= read -r t; do
          [ -n "$t" ] && grep -rnF -e "\"$t\"" -e "'$t'" ui web app core --include='*.cpp' --include='*.h' --include='*.js' --include='*.html'
        done <<<"$titles" | grep -v '^core/records/charts\.cpp:' | grep -v '^[^:]*:[0-9]*:[[:space:]]*//')
if [ -n "$lists" ]; then
  echo "chart titles spelled outside the chart catalogue core/records/charts.cpp (draw from chart_catalogue() or GET /grpo/dashboard/charts):"
  echo "$lists"
  status=1
fi
kind_lists=$(grep -rnE "[\"']pause[\"'].*[\"']resume[\"']|[\"']resume[\"'].*[\"']pause[\"']" ui web app core \
              --include='*.cpp' --include='*.h' --include='*.js' --include='*.html' |
            grep -v '^core/records/catalogue\.cpp:' | grep -v '^[^:]*:[0-9]*:[[:space:]]*//')
if [ -n "$kind_lists" ]; then
  echo "event kinds listed outside the event catalogue core/records/catalogue.cpp (use run::event_is_marker,"
  echo "event_severity, event_label, or GET /grpo/dashboard/event-kinds):"
  echo "$kind_lists"
  status=1
fi
worker_headers='adapter_store\|completion_api\|worker_batcher\|worker_server'
walls=$( (grep -rn '#include \(<torch/\|<Q\|"core/\(run\|serve\|cluster\|model\|grpo\|rollout\|text\|hub\|api\)/\)' core/records
          grep -rn '#include \(<torch/\|"core/\(run\|model\|grpo\|rollout\|text\|api\)/\|"core/cluster/\('"$worker_headers"'\)\.h\)' core/serve) |
         grep -v '^core/[a-z]*/[a-z_]*_wall\.cpp:')
if [ -n "$walls" ]; then
  echo "core/records or core/serve includes a header from above its wall (docs/ARCHITECTURE.md, \"Layers\"):"
  echo "$walls"
  status=1
fi
[ "$status" = 0 ] && echo "layers: ok"
exit "$status"
