# file management
mkdir -p build/out
cp data/words.txt build/out/w.txt
mv build/out/w.txt build/out/words.txt
rm notes.txt
ls build/out
[ -e notes.txt ] || echo "notes removed"
rmdir empty-dir && echo "empty-dir removed"
