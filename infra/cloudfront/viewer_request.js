// Viewer-request function (cloudfront-js-2.0). It normalizes what the cache key is built from,
// so that every reader of the same data shares one cache entry:
// - query parameters in sorted order (CloudFront keys on the order they arrive in);
// - HEAD requests marked with x-ds-method, a key header, so they never share a GET's entry;
// - the viewer's Host passed on as x-forwarded-host (the origin request policy replaces Host
//   with the Function URL's own), so the origin names the CDN in Location headers.
function handler(event) {
  var request = event.request;
  var query = request.querystring;
  var names = Object.keys(query).sort();
  var sorted = {};
  for (var i = 0; i < names.length; i++) {
    var entry = query[names[i]];
    if (entry.multiValue && entry.multiValue.length > 1) {
      var values = entry.multiValue.map(function (item) { return item.value; }).sort();
      sorted[names[i]] = {
        value: values[0],
        multiValue: values.map(function (value) { return { value: value }; })
      };
    } else {
      sorted[names[i]] = { value: entry.value };
    }
  }
  request.querystring = sorted;

  var headers = request.headers;
  if (request.method === 'HEAD') {
    headers['x-ds-method'] = { value: 'HEAD' };
  } else {
    delete headers['x-ds-method'];
  }
  if (headers.host) {
    headers['x-forwarded-host'] = { value: headers.host.value };
  }
  return request;
}
