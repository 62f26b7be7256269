# find | xargs wc -l
find src -name '*.js' | sort | xargs wc -l
