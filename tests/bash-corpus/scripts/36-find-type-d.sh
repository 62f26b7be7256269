# find -type d, -maxdepth
find docs -type d | sort
find . -maxdepth 1 -name '*.md'
