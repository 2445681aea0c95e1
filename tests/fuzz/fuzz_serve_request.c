/* bert serve's request bodies (serve/request.h): any bytes, for each endpoint, give a request
 * or an HTTP status with a message, never a crash or a leak; a request's texts are valid,
 * non-empty UTF-8 and within the limit. The first byte picks the endpoint. */
#include <assert.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const ServeEndpoint ep = (ServeEndpoint)(data[0] % 3);
    const ServeLimits lim = {.max_inputs = 8};
    ServeRequest r;
    BertError err;
    const int status = serve_request_parse(ep, (const char *)data + 1, size - 1, &lim, &r, &err);
    if (status == 0) {
        assert(r.n >= 1 && r.n <= lim.max_inputs);
        for (int i = 0; i < r.n; i++) {
            assert(r.text_a[i] && r.text_a[i][0] && serve_valid_utf8(r.text_a[i], strlen(r.text_a[i])));
            assert(!r.text_b || !r.text_b[i] || serve_valid_utf8(r.text_b[i], strlen(r.text_b[i])));
        }
    } else {
        assert((status == 400 || status == 413) && err.msg[0]);
    }
    serve_request_free(&r);
    return 0;
}
