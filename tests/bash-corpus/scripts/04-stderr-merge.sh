# 2>&1 merges stderr into stdout
{ echo out; echo err >&2; } 2>&1 | sort
