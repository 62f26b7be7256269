# basename and dirname
basename src/lib/helpers.js .js
dirname src/lib/helpers.js
basename -- "with space.txt"
