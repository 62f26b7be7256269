# ls of the workspace root
# known: just-bash adds bin, dev, proc and usr to the workspace root
ls
