// Runs the CloudFront viewer-request function under Node on the events given as a JSON array on
// stdin, and prints what it returned for each: the function's own source, evaluated in a fresh
// context with nothing but what CloudFront Functions provide to it.
const fs = require('fs');
const vm = require('vm');

const source = fs.readFileSync(process.argv[2], 'utf8');
const events = JSON.parse(fs.readFileSync(0, 'utf8'));
const results = events.map((event) => {
  const context = vm.createContext({});
  vm.runInContext(source, context);
  return vm.runInContext('handler', context)(event);
});
process.stdout.write(JSON.stringify(results));
