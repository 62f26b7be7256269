# subshell keeps cd local
# known: ls with several file operands separates them with blank lines
(cd src && ls *.py)
ls -d src
cd docs && cat guide.md | head -1
