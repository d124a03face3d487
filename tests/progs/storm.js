// storm.js: an allocation storm — node's crypto.pbkdf2Sync, whose OpenSSL 3 HMAC steps allocate
// and free millions of times a second, in N worker threads for S seconds. Prints the iterations
// done (higher is faster). For the bench (scripts/bench-storm): libprof's cost on such a program.
//   node storm.js [N=2] [S=2]
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
if (isMainThread) {
    const n = +process.argv[2] || 2, secs = +process.argv[3] || 2;
    let done = 0, total = 0;
    for (let i = 0; i < n; i++) {
        const w = new Worker(__filename, { workerData: secs });
        w.on('message', (m) => {
            total += m;
            if (++done === n) console.log(total);
        });
    }
} else {
    const end = Date.now() + workerData * 1000;
    let it = 0;
    while (Date.now() < end) {
        crypto.pbkdf2Sync('password', 'salt', 1000, 32, 'sha256');
        it++;
    }
    parentPort.postMessage(it);
}
