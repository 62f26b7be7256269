# ** with globstar
shopt -s globstar
for f in src/**/*.js; do echo "$f"; done
