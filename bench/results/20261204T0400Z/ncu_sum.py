import csv,sys,re,collections
def load(p):
    rows=[r for r in csv.DictReader(l for l in open(p) if l.startswith('"'))]
    ks=[(r['Kernel Name'],float(r['Metric Value'].replace(',',''))/1000,r['Grid Size'],r['Block Size']) for r in rows if r['Metric Name']=='gpu__time_duration.sum']
    return ks
for p in sys.argv[1:]:
    ks=load(p)
    # last prefill attention launch index
    last_pf=max(i for i,k in enumerate(ks) if 'prefill' in k[0])
    dec=ks[last_pf+1:]
    natt=sum(1 for k in dec if 'decode_kernel' in k[0])
    steps=natt//28
    agg=collections.OrderedDict()
    for n,t,g,b in dec:
        short=re.sub(r'\(.*','',n)[:90]
        key=(short,g,b)
        a=agg.setdefault(key,[0,0.0]); a[0]+=1; a[1]+=t
    tot=sum(v[1] for v in agg.values())/steps
    print(f"== {p}: {steps} decode steps, {len(dec)/steps:.0f} kernels/step, sum {tot:.1f} us/step")
    for (n,g,b),(c,t) in sorted(agg.items(),key=lambda x:-x[1][1]):
        print(f"  {t/steps:8.1f} us  x{c/steps:5.1f}  {t/c:7.2f} us each  grid {g} block {b}  {n}")
