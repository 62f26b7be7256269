# * glob
# known: ls with several file operands separates them with blank lines
echo data/*.txt
ls src/*.py
