# find -name with a pattern
find src -name '*.py' | sort
find docs -type f | sort
