# find | xargs grep -l
find . -name '*.py' -o -name '*.js' | sort | xargs grep -l TODO
