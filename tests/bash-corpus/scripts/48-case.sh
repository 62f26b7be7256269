# case with patterns
for f in a.py b.js c.md d; do
  case "$f" in
    *.py) echo "$f python" ;;
    *.js|*.ts) echo "$f javascript" ;;
    *.md) echo "$f markdown" ;;
    *) echo "$f other" ;;
  esac
done
